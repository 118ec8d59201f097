"""Record a real SGLang server's responses to a fixed set of requests as small JSON fixtures.

The fixtures (tests/engines/sim/fixtures/sglang-<version>/) are what
tests/engines/sim/test_against_sglang.py diffs the simulator against: JSON bodies and parsed
SSE events (long strings truncated), /metrics as names, types and label keys (no values),
/server_info as keys and value types (plus a few scalar fields), and the status and body of
/health, /health_generate and /flush_cache.

    /work/main/.venv-engines/bin/python scripts/record_sglang.py            # start SGLang
    python scripts/record_sglang.py --url http://127.0.0.1:30000            # use a running one

Started here: ``python -m sglang.launch_server --device cpu --attention-backend torch_native``
on 127.0.0.1 with the tiny target model of scripts/tiny_models.py; the server's process group
is stopped (SIGTERM, then SIGKILL after 10 s) whatever happens. Requests are greedy
(temperature 0) with a fixed seed, so the recorded text is deterministic. Standard library
only, so it runs from any interpreter.
"""

from __future__ import annotations

import argparse
import glob
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "tests" / "engines" / "sim" / "fixtures"
MAX_STR = 120
"""Strings longer than this are cut (the fixtures stay small and free of long model text)."""

PROMPT = "Hello there"
MESSAGES = [{"role": "user", "content": "Say something about the sea."}]
GEN_PARAMS = {"max_new_tokens": 6, "temperature": 0, "sampling_seed": 1}
USAGE_OPTS = {"include_usage": True, "continuous_usage_stats": True}

REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    # (fixture name, path, body)
    ("generate", "/generate", {"text": PROMPT, "sampling_params": GEN_PARAMS}),
    ("generate_stream", "/generate",
     {"text": PROMPT, "sampling_params": GEN_PARAMS, "stream": True}),
    ("chat", "/v1/chat/completions",
     {"model": "", "messages": MESSAGES, "max_tokens": 6, "temperature": 0, "seed": 1}),
    ("chat_stream", "/v1/chat/completions",
     {"model": "", "messages": MESSAGES, "max_tokens": 6, "temperature": 0, "seed": 1,
      "stream": True}),
    ("chat_stream_usage", "/v1/chat/completions",
     {"model": "", "messages": MESSAGES, "max_tokens": 6, "temperature": 0, "seed": 1,
      "stream": True, "stream_options": USAGE_OPTS}),
    ("completions", "/v1/completions",
     {"model": "", "prompt": PROMPT, "max_tokens": 6, "temperature": 0, "seed": 1}),
    ("completions_stream_usage", "/v1/completions",
     {"model": "", "prompt": PROMPT, "max_tokens": 6, "temperature": 0, "seed": 1,
      "stream": True, "stream_options": USAGE_OPTS}),
    ("completions_stream_include_usage", "/v1/completions",
     {"model": "", "prompt": PROMPT, "max_tokens": 6, "temperature": 0, "seed": 1,
      "stream": True, "stream_options": {"include_usage": True}}),
]
SERVER_INFO_SCALARS = ("version", "model_path", "context_length", "max_total_num_tokens",
                       "max_running_requests", "chunked_prefill_size", "speculative_algorithm",
                       "speculative_num_draft_tokens", "enable_metrics", "tp_size", "dp_size",
                       "page_size", "disable_radix_cache", "schedule_policy")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def default_model() -> str | None:
    pattern = os.path.expanduser("~/.cache/specgrid/tiny-models/*/target")
    found = sorted(glob.glob(pattern))
    return found[0] if found else None


def trunc(obj: Any) -> Any:
    """Cut long strings, recursively."""
    if isinstance(obj, str):
        return obj if len(obj) <= MAX_STR else obj[:MAX_STR] + "...<cut>"
    if isinstance(obj, list):
        return [trunc(v) for v in obj]
    if isinstance(obj, dict):
        return {k: trunc(v) for k, v in obj.items()}
    return obj


def type_name(v: Any) -> str:
    """JSON type of a value: null, bool, int, float, str, list, dict."""
    if v is None:
        return "null"
    return type(v).__name__


class Client:
    def __init__(self, url: str) -> None:
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80

    def request(self, method: str, path: str, body: Any = None,
                timeout: float = 120.0) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, raw
        finally:
            conn.close()


def sse_events(raw: bytes) -> list[Any]:
    """Parsed ``data:`` payloads; ``[DONE]`` stays a string."""
    out: list[Any] = []
    for block in raw.decode(errors="replace").split("\n\n"):
        block = block.strip()
        if not block:
            continue
        if not block.startswith("data:"):
            out.append({"_raw": block[:MAX_STR]})
            continue
        payload = block[len("data:"):].strip()
        out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def media_type(headers: dict[str, str]) -> str:
    return headers.get("content-type", "").split(";")[0].strip()


def parse_metrics(text: str) -> dict[str, dict[str, Any]]:
    """Prometheus text -> {family: {"type", "help", "samples": {sample name: [label keys]}}}
    for the ``sglang:`` families (values left out)."""
    fams: dict[str, dict[str, Any]] = {}
    sample_re = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s")
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"')
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            fams.setdefault(name, {"type": kind, "help": "", "samples": {}})["type"] = kind
        elif line.startswith("# HELP "):
            parts = line.split(" ", 3)
            fams.setdefault(parts[2], {"type": "untyped", "help": "", "samples": {}})
            fams[parts[2]]["help"] = parts[3] if len(parts) > 3 else ""
        elif line and not line.startswith("#"):
            m = sample_re.match(line)
            if not m:
                continue
            sample = m.group(1)
            labels = sorted(label_re.findall(m.group(3) or ""))
            fam = max((f for f in fams if sample.startswith(f)), key=len, default=sample)
            fams.setdefault(fam, {"type": "untyped", "help": "", "samples": {}})
            if "le" in labels or "quantile" in labels:
                labels = [k for k in labels if k not in ("le", "quantile")]
            known = fams[fam]["samples"].setdefault(sample, labels)
            if known != labels:
                fams[fam]["samples"][sample] = sorted(set(known) | set(labels))
    return {k: v for k, v in sorted(fams.items()) if k.startswith("sglang:")}


def shape_of(obj: Any, depth: int = 0) -> Any:
    """Keys and value types of a dict (nested dicts two levels deep), else the type name."""
    if isinstance(obj, dict) and depth < 3:
        return {k: shape_of(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list) and obj and isinstance(obj[0], dict) and depth < 3:
        return [shape_of(obj[0], depth + 1)]
    return type_name(obj)


def write(out: Path, name: str, obj: Any) -> None:
    path = out / f"{name}.json"
    path.write_text(json.dumps(obj, indent=1, ensure_ascii=False) + "\n")
    print(f"  {path.relative_to(REPO) if path.is_relative_to(REPO) else path} "
          f"({path.stat().st_size} bytes)")


def record(url: str, out_root: Path, model_label: str | None) -> Path:
    c = Client(url)
    st, _, raw = c.request("GET", "/server_info")
    if st != 200:
        raise SystemExit(f"GET /server_info answered {st}: {raw[:200]!r}")
    info = json.loads(raw)
    version = str(info.get("version", "unknown"))
    out = out_root / f"sglang-{version}"
    out.mkdir(parents=True, exist_ok=True)
    print(f"recording SGLang {version} at {url} into {out}")
    model = str(info.get("served_model_name") or info.get("model_path") or "")
    write(out, "server_info", {
        "status": st, "n_keys": len(info), "keys": shape_of(info),
        "scalars": {k: info.get(k) for k in SERVER_INFO_SCALARS if k in info},
    })
    for path in ("/health", "/health_generate"):
        t0 = time.monotonic()
        st, hdrs, raw = c.request("GET", path)
        write(out, path.strip("/"), {"method": "GET", "status": st,
                                     "content_type": media_type(hdrs),
                                     "body": raw.decode(errors="replace"),
                                     "seconds": round(time.monotonic() - t0, 2)})
    for name, path, body in REQUESTS:
        body = dict(body)
        if "model" in body:
            body["model"] = model
        st, hdrs, raw = c.request("POST", path, body)
        rec: dict[str, Any] = {"request": {"path": path, "body": body}, "status": st,
                               "content_type": media_type(hdrs)}
        if body.get("stream"):
            rec["events"] = trunc(sse_events(raw))
        else:
            rec["body"] = trunc(json.loads(raw))
        write(out, name, rec)
    st, hdrs, raw = c.request("GET", "/metrics")
    text = raw.decode(errors="replace")
    fams = parse_metrics(text)
    write(out, "metrics", {"status": st, "content_type": media_type(hdrs),
                           "n_families": len(fams), "families": fams})
    for method in ("POST", "GET"):
        st, hdrs, raw = c.request(method, "/flush_cache")
        write(out, f"flush_cache_{method.lower()}",
              {"method": method, "status": st, "content_type": media_type(hdrs),
               "body": raw.decode(errors="replace")})
    meta = {"sglang_version": version, "url_given": model_label is None,
            "model": model_label or model, "recorded_at": time.strftime("%Y-%m-%d"),
            "requests": [n for n, _, _ in REQUESTS]}
    write(out, "_recording", meta)
    return out


def start_server(python: str, model: str, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    cmd = [python, "-m", "sglang.launch_server", "--model-path", model, "--device", "cpu",
           "--attention-backend", "torch_native", "--max-total-tokens", "16384",
           "--context-length", "4096", "--enable-metrics", "--host", "127.0.0.1",
           "--port", str(port), "--random-seed", "0"]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    log = open(log_path, "wb")  # noqa: SIM115 - handed to the child
    print("starting:", " ".join(cmd), f"(log {log_path})")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    c = Client(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"SGLang exited with {proc.returncode} before it was ready")
        try:
            if c.request("GET", "/health_generate", timeout=10)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(1.0)
    raise SystemExit(f"SGLang not ready after {timeout:.0f} s")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    except ProcessLookupError:
        pass
    try:  # children left in the group (scheduler, detokenizer)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="use this running server instead of starting one")
    ap.add_argument("--model", default=default_model(), help="model folder (tiny target)")
    ap.add_argument("--python", default=sys.executable, help="interpreter with sglang")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="fixtures root folder")
    ap.add_argument("--timeout", type=float, default=300.0, help="start-up timeout, seconds")
    args = ap.parse_args(argv)
    if args.url:
        record(args.url.rstrip("/"), args.out, None)
        return 0
    if not args.model:
        raise SystemExit("no model: build one with scripts/tiny_models.py or pass --model")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = Path(tempfile.gettempdir()) / f"record-sglang-{port}.log"
    proc = start_server(args.python, args.model, port, log_path)
    try:
        wait_ready(url, proc, args.timeout)
        label = "tiny-models/" + "/".join(Path(args.model).parts[-2:])
        record(url, args.out, label)
    finally:
        stop_server(proc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

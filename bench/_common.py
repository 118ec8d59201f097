"""What the benches share: `python -m grid.run` and `python -m grid.twin` as a user runs them,
the simulator and the fixed-schedule server's processes, specgrid's client in a process of its
own and the server's stamps, probes of the shared machine (the server's stream: _stream.py).

bench/ is not a package: a script imports this module from its own folder (``sys.path[0]``
when Python runs a script); the repository's packages come from the project's environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
"""The repository: where `python -m grid.run` runs (its conf/ and packages)."""
ENGINES_PYTHON = os.environ.get("SPECGRID_VLLM_PYTHON", str(ROOT / ".venv-engines/bin/python"))
"""The Python of the real engines (vLLM, SGLang) on the CPU."""
SERVER_CPU, CLIENT_CPU = 0, 1
"""Where the load generator's benches pin the server and each client process."""
TIMING_REQUEST_S = 0.02 + 31 * 0.02
"""A request of the timing runs (``/sched/20/20``, 64 tokens): first chunk at 20 ms, then ~31
more (1-3 tokens each) every 20 ms."""


# -- grid and twin runs ---------------------------------------------------------------------
def run_grid(overrides: list[str], folder: Path, run_id: str) -> tuple[float, Path, int]:
    """One `python -m grid.run` into `folder/run_id`: (wall seconds, run folder, exit code);
    its output is kept as `folder/<run_id>.log`, its wall seconds as `folder/<run_id>.wall`;
    a run that fails exits the bench."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "grid.run", *overrides,
                           f"results_dir={folder.resolve()}", f"run.id={run_id}"],
                          capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - start
    (folder / f"{run_id}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"{run_id}: grid.run exited {proc.returncode} (see {folder / run_id}.log)")
    (folder / f"{run_id}.wall").write_text(f"{wall:.1f}")
    return wall, folder / run_id, proc.returncode


def run_twin(run_dir: Path, flags: list[str], log: Path) -> None:
    """`python -m grid.twin RUN FLAGS` (writes RUN/twin.json), its output kept in `log`; exits
    the bench when it fails."""
    proc = subprocess.run([sys.executable, "-m", "grid.twin", str(run_dir), *flags],
                          capture_output=True, text=True, cwd=ROOT)
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"grid.twin failed (exit {proc.returncode}, see {log})")


# -- servers --------------------------------------------------------------------------------
def launch_sim(argv: list[str], cpu: int | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """`python -m engines.sim ARGV` on a free port, on CPU `cpu` when given and the machine has
    more than one; returns the process and its URL once /health answers (its log in a
    temporary file, named if it never does)."""
    from actors._process import free_port  # here, as in `pct`: a worker imports from --root

    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="specgrid-sim-", suffix=".log", delete=False)
    proc = subprocess.Popen([*taskset(cpu), sys.executable, "-m", "engines.sim", "--host",
                             "127.0.0.1", "--port", str(port), *argv],
                            cwd=ROOT, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                return proc, url
        except OSError:  # not listening yet, or 503 while it starts
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the simulator did not answer /health within 120 s (log {log.name})")


def taskset(cpu: int | None) -> list[str]:
    """The command prefix that runs a command on CPU `cpu` (none: `cpu` is None, or the machine
    has a single CPU)."""
    return ["taskset", "-c", str(cpu)] if cpu is not None and (os.cpu_count() or 1) > 1 else []


@contextmanager
def stopping(proc: subprocess.Popen[Any]) -> Iterator[None]:
    """Terminate `proc` when the block ends, however it ends."""
    try:
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:  # it ignored SIGTERM
            proc.kill()
            proc.wait(timeout=20)


# -- client processes and the server's stamps -----------------------------------------------
TOKENIZER = """
# a word-level tokenizer of 1M words: SGLang's random-ids prompts are runs of consecutive ids
# from a random offset, so a small vocabulary makes prompts (the server's stamp keys) collide
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
vocab = {"[UNK]": 0, "[BOS]": 1, "[EOS]": 2, **{f"w{i}": i for i in range(3, 1_000_000)}}
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="[BOS]",
                        eos_token="[EOS]").save_pretrained(sys.argv[1])
"""
"""Writes the local tokenizer SGLang's clients run with (``python -c TOKENIZER DIR``)."""


def main_or_worker(main: Callable[[], Any], worker: Callable[[dict[str, Any]], None]) -> None:
    """A script's entry point: its ``worker`` on the config when `worker_cmd` started it, else
    its ``main``."""
    if sys.argv[1:2] == ["--worker"]:
        worker(json.loads(sys.argv[2]))
    else:
        main()


def worker_cmd(script: str, cfg: dict[str, Any]) -> list[str]:
    """The command that runs `script`'s worker on `cfg` in a process of its own."""
    return [sys.executable, script, "--worker", json.dumps(cfg)]


def start_client(cmd: list[str], cwd: Path | None = None) -> subprocess.Popen[str]:
    """`cmd` on CLIENT_CPU (taskset), offline for Hugging Face, its output collected."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return subprocess.Popen([*taskset(CLIENT_CPU), *cmd], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish_client(proc: subprocess.Popen[str], out: Path, name: str) -> None:
    """Wait for a client; it failed unless it exited 0 and wrote `out`."""
    log, _ = proc.communicate(timeout=900)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"{name} failed ({proc.returncode}): {log[-3000:]}")


def client_spec(cfg: dict[str, Any]) -> Any:
    """specgrid's client in a worker: the LoadSpec of `cfg` (url, concurrency, requests,
    tokens; warmup (default one request per stream), rate, transport, timeout_s, root: the
    checkout whose actors/ to import). Prompts: code-like ones (``code``: for the simulator),
    or distinct ids (the server's stamp keys); each prompt's id is its text."""
    if cfg.get("root"):
        sys.path.insert(0, cfg["root"])
    from actors.loadgen.spec import LoadSpec, Prompt

    n, warm = cfg["requests"], cfg.get("warmup", cfg["concurrency"])
    texts = [f"def f{i}(x):\n    return x * {i}\n" * 20 if cfg.get("code")
             else f"p{i}-{time.time_ns()}" for i in range(n + warm)]
    domain = "coding" if cfg.get("code") else "bench"
    return LoadSpec(url=cfg["url"], prompts=tuple(Prompt(t, t, domain) for t in texts),
                    concurrency=cfg["concurrency"], rate=cfg.get("rate"), num_requests=n,
                    warmup_requests=warm, max_new_tokens=cfg["tokens"],
                    transport=cfg.get("transport", "raw"), seed=1,
                    request_timeout_s=cfg.get("timeout_s", 120.0))


def client_worker(cfg: dict[str, Any]) -> None:
    """specgrid's client in a process of its own (`worker_cmd`): `run_load` on
    `client_spec(cfg)`, on uvloop unless cfg's ``loop`` is asyncio, its reads counted with
    ``count_reads`` (the wrapper costs CPU).
    Written to ``out``: its rows (send and due times on the server's perf_counter clock), its
    stats, its reads and its process CPU."""
    spec = client_spec(cfg)  # first: it imports actors/ from cfg's root
    from actors.loadgen import h1
    from actors.loadgen.runner import run_load

    reads = [0]
    if cfg.get("count_reads"):
        received = h1.H1Connection.data_received

        def counted(self: h1.H1Connection, data: bytes) -> None:
            reads[0] += 1
            received(self, data)

        h1.H1Connection.data_received = counted  # type: ignore[method-assign]
    res = run_on(cfg.get("loop", "uvloop"), run_load(spec))
    off = res.stats["clock_offset_s"]
    use = resource.getrusage(resource.RUSAGE_SELF)
    Path(cfg["out"]).write_text(json.dumps({
        "rows": [{"prompt_id": r["prompt_id"], "ok": r["status"] == "ok", "ttft_s": r["ttft_s"],
                  "itl_s": r["itl_s"], "sent": r["sent_at"] - off, "due": r["scheduled_at"] - off,
                  "chunks": len(r["chunk_tokens"] or ())} for r in res.rows],
        "stats": res.stats, "reads": reads[0], "user_s": use.ru_utime, "sys_s": use.ru_stime},
        default=str))


def run_on(loop: str, coro: Coroutine[Any, Any, Any]) -> Any:
    """Run `coro` on a fresh event loop: uvloop, or asyncio's own."""
    if loop == "uvloop":
        import uvloop

        return uvloop.run(coro)
    return asyncio.run(coro)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def pct(xs: Sequence[float], q: float) -> float:
    """The q-th percentile (specgrid's own rule, numpy's default); NaN for no values."""
    # imported here: a client worker imports the repository's packages from its --root
    from specgrid_metrics.requests import percentile

    v = percentile(xs, q)
    return float("nan") if v is None else v


def window(stamps: Iterable[dict[str, Any]]) -> tuple[float, float, int, int]:
    """(start, end, chunks, tokens) of requests by the server's stamps: first received -> last
    chunk written, and the chunks and tokens written."""
    ss = list(stamps)
    return (min(s["recv"] for s in ss), max(s["sent"][-1] for s in ss),
            sum(len(s["sent"]) for s in ss), sum(sum(s["tokens"]) for s in ss))


class CpuSampler(threading.Thread):
    """(perf_counter, CPU seconds, user CPU seconds) of one process every ``period_s`` from
    now on, while it lives (or until ``stopped`` is set)."""

    def __init__(self, pid: int, period_s: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.proc, self.period_s = psutil.Process(pid), period_s
        self.stopped = False
        self.samples: list[tuple[float, float, float]] = []
        self.start()

    def run(self) -> None:
        while not self.stopped:
            try:
                cpu = self.proc.cpu_times()  # user and system, all threads
            except psutil.NoSuchProcess:
                return
            self.samples.append((time.perf_counter(), cpu.user + cpu.system, cpu.user))
            time.sleep(self.period_s)

    def at(self, t: float, user: bool = False) -> float:
        """CPU seconds (user only when ``user``) at ``t``, interpolated between samples."""
        s = [(x[0], x[2] if user else x[1]) for x in self.samples]
        for (t0, c0), (t1, c1) in zip(s, s[1:], strict=False):
            if t0 <= t <= t1:
                return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c0
        return s[0][1] if t < s[0][0] else s[-1][1]

    def used(self, start: float, end: float) -> tuple[float, float]:
        """(CPU, user CPU) seconds between ``start`` and ``end``."""
        return self.at(end) - self.at(start), self.at(end, True) - self.at(start, True)


# -- the machine (shared: other jobs take CPU from the benches) -----------------------------
def pin(cpu: int) -> None:
    """Keep this process on CPU `cpu` where the machine has it."""
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > cpu:
        os.sched_setaffinity(0, {cpu})


def cpu_available(seconds: float = 1.0) -> float:
    """Share of a core a spinning loop gets on this process's CPUs (1.0 = an idle core)."""
    t0, c0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < seconds:
        pass
    return (time.process_time() - c0) / (time.perf_counter() - t0)

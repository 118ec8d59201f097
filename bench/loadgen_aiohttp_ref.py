"""Reference client written the way SGLang's ``bench_serving`` streams ``/generate``.

A new ``aiohttp.ClientSession`` per request (``read_bufsize`` 10 MiB, as SGLang sets it),
``async for chunk_bytes in response.content`` (line iteration), ``data: `` prefix removal and
``json.loads`` per event, ITL split by Δ``completion_tokens``; requests started as tasks behind an
``asyncio.Semaphore(max_concurrency)``. Used only as the yardstick in
``bench/loadgen_throughput.py``.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import aiohttp

AIOHTTP_TIMEOUT = aiohttp.ClientTimeout(total=6 * 60 * 60)


@dataclass
class RefOutput:
    prompt: str
    success: bool = False
    ttft: float = 0.0
    latency: float = 0.0
    itl: list[float] = field(default_factory=list)
    output_len: int = 0
    start: float = 0.0
    error: str = ""


def _remove_prefix(text: str, prefix: str) -> str:
    return text[len(prefix):] if text.startswith(prefix) else text


async def request_generate(api_url: str, prompt: str, max_new_tokens: int) -> RefOutput:
    payload = {
        "text": prompt,
        "sampling_params": {"temperature": 0.0, "max_new_tokens": max_new_tokens,
                            "ignore_eos": True},
        "stream": True,
    }
    output = RefOutput(prompt=prompt)
    async with aiohttp.ClientSession(timeout=AIOHTTP_TIMEOUT,
                                     read_bufsize=10 * 1024 * 1024) as session:
        generated_text = ""
        ttft = 0.0
        st = time.perf_counter()
        output.start = st
        most_recent_timestamp = st
        last_output_len = 0
        try:
            async with session.post(url=api_url, json=payload) as response:
                if response.status == 200:
                    async for chunk_bytes in response.content:
                        chunk_bytes = chunk_bytes.strip()
                        if not chunk_bytes:
                            continue
                        chunk = _remove_prefix(chunk_bytes.decode("utf-8"), "data: ")
                        if chunk == "[DONE]":
                            pass
                        else:
                            data = json.loads(chunk)
                            if "text" in data and data["text"]:
                                timestamp = time.perf_counter()
                                generated_text = data["text"]
                                output_len = data["meta_info"]["completion_tokens"]
                                if ttft == 0.0:
                                    ttft = time.perf_counter() - st
                                    output.ttft = ttft
                                else:
                                    num_new_tokens = output_len - last_output_len
                                    if num_new_tokens == 0:
                                        continue
                                    gap = timestamp - most_recent_timestamp
                                    adjust_itl = gap / num_new_tokens
                                    output.itl.extend([adjust_itl] * num_new_tokens)
                                most_recent_timestamp = timestamp
                                last_output_len = output_len
                    output.success = True
                    output.latency = time.perf_counter() - st
                    output.output_len = last_output_len
                    del generated_text
                else:
                    output.error = response.reason or ""
        except Exception as exc:  # noqa: BLE001 - as the reference does
            output.error = repr(exc)
    return output


async def run(api_url: str, prompts: list[str], max_new_tokens: int,
              max_concurrency: int) -> tuple[list[RefOutput], float, float]:
    """All prompts as tasks behind a semaphore; returns (outputs, start, end) perf_counter."""
    sem = asyncio.Semaphore(max_concurrency)

    async def limited(p: str) -> RefOutput:
        async with sem:
            return await request_generate(api_url, p, max_new_tokens)

    start = time.perf_counter()
    tasks = [asyncio.create_task(limited(p)) for p in prompts]
    outputs = await asyncio.gather(*tasks)
    return list(outputs), start, time.perf_counter()

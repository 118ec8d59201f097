"""Which SGLang versions know which ServerArgs flags: the version facts that flag building needs.

Read from the released wheels' `sglang/srt/server_args.py` (0.5.10-0.5.23) and, for 0.5.19 and
0.5.23, checked against the real parser (see `engines.sglang.validate`):

- `cuda_graph_max_bs`: a real flag up to 0.5.13; 0.5.14-0.5.19 a deprecated alias that stores
  into `cuda_graph_max_bs_decode`; gone from 0.5.20 (argparse exits 2, "ambiguous option").
- `cuda_graph_max_bs_decode`: from 0.5.14.
- `cuda_graph_bs` / `cuda_graph_bs_decode`: the same story.
- `enable_flashinfer_allreduce_fusion`: every version; deprecated from 0.5.14, where SGLang
  turns it into `flashinfer_allreduce_fusion_backend=auto`.
- `flashinfer_allreduce_fusion_backend` {auto, trtllm, mnnvl, cutedsl}: from 0.5.14.
- `speculative_adaptive`, `speculative_adaptive_config`: from 0.5.11; candidate step 0 (no
  drafting) is accepted from 0.5.14 (0.5.11-0.5.13 demand positive steps).
- env `SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND`: from 0.5.14.

This covers the flags whose existence changed and that specgrid's variants use; any other
field is passed through and checked against the real parser by `engines.sglang.validate`.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from engines.validation import FlagError

V0_5_11 = Version("0.5.11")
V0_5_14 = Version("0.5.14")


@dataclass(frozen=True)
class FlagSpan:
    """The SGLang versions in which one ServerArgs field has a command-line flag."""

    field: str
    """ServerArgs field name, e.g. `cuda_graph_max_bs_decode`."""
    since: Version | None = None
    """First version with the flag (None = as old as specgrid cares about)."""
    until: Version | None = None
    """Last version with the flag, inclusive (None = still there)."""
    replacement: str | None = None
    """Field to use instead where this one is missing (named in errors)."""

    def exists_in(self, version: Version) -> bool:
        """Whether `version` accepts the flag."""
        if self.since is not None and version < self.since:
            return False
        return not (self.until is not None and version > self.until)


FLAG_SPANS: dict[str, FlagSpan] = {
    span.field: span
    for span in (
        FlagSpan("cuda_graph_max_bs", until=Version("0.5.19"),
                 replacement="cuda_graph_max_bs_decode"),
        FlagSpan("cuda_graph_max_bs_decode", since=V0_5_14, replacement="cuda_graph_max_bs"),
        FlagSpan("cuda_graph_bs", until=Version("0.5.19"), replacement="cuda_graph_bs_decode"),
        FlagSpan("cuda_graph_bs_decode", since=V0_5_14, replacement="cuda_graph_bs"),
        FlagSpan("flashinfer_allreduce_fusion_backend", since=V0_5_14,
                 replacement="enable_flashinfer_allreduce_fusion"),
        FlagSpan("speculative_adaptive", since=V0_5_11),
        FlagSpan("speculative_adaptive_config", since=V0_5_11),
    )
}
"""Fields whose flag exists only in some versions (see the module table)."""

ZERO_STEP_SINCE = V0_5_14
"""First version whose adaptive config accepts candidate step 0 (speculation off)."""


def parse_version(version: str | Version | None) -> Version | None:
    """`"0.5.23"`, `"0.5.13.post1"`, `"v0.5.20rc1"` -> Version; None stays None (= unknown).
    Raises FlagError for text that is no version."""
    if version is None or isinstance(version, Version):
        return version
    text = str(version).strip()
    if not text:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        raise FlagError(f"not an SGLang version: {version!r}", version=str(version)) from None


def at_least(version: str | Version | None, minimum: Version) -> bool | None:
    """`version >= minimum` on the release part (0.5.14rc1 counts as 0.5.14); None if unknown."""
    v = parse_version(version)
    return None if v is None else release(v) >= minimum


def release(version: Version) -> Version:
    """The release part only: 0.5.13.post1 and 0.5.14rc1 -> 0.5.13 and 0.5.14."""
    return Version(".".join(str(p) for p in version.release))

"""The sandbox's resource settings: the limits every command runs under and the uids handed out."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Limits(BaseModel):
    """Resource limits applied to every sandboxed command."""

    model_config = ConfigDict(extra="forbid")

    cpu_seconds: int = Field(60, ge=1, le=3600, description="CPU seconds (RLIMIT_CPU) per process")
    memory_mb: int = Field(
        2048,
        ge=64,
        le=65536,
        description="memory of the whole command (cgroup memory.max) and address space of each of its "
        "processes (RLIMIT_AS), MB; without a cgroup only the per-process limit holds",
    )
    processes: int = Field(
        128,
        ge=4,
        le=4096,
        description="processes of the command (cgroup pids.max, and RLIMIT_NPROC of its own uid)",
    )
    file_size_mb: int = Field(
        64, ge=1, le=65536, description="largest file a command may write (RLIMIT_FSIZE), MB"
    )
    tmp_size_mb: int = Field(256, ge=1, le=65536, description="size of the private /tmp, MB")
    max_output_mb: int = Field(
        64, ge=1, le=4096, description="stdout+stderr after which the command is killed (kept: head and tail)"
    )


class UidRange(BaseModel):
    """The uids (and same-numbered gids) handed out to running commands, one per command."""

    model_config = ConfigDict(extra="forbid")

    first: int = Field(61000, ge=1, le=4_294_000_000, description="first uid of the range")
    count: int = Field(
        1000, ge=1, le=65536, description="how many; also the most commands that can run at once"
    )

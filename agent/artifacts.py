"""Artifacts: full tool outputs kept beside the capped text the model sees."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, insert, select

from xihe.agent.canonical import sha256_text
from xihe.agent.core_tables import artifact

PREVIEW_CHARS = 400


@dataclass(frozen=True)
class ArtifactRef:
    """What a step records and the model is told: where the full output is and what it was."""

    id: str
    sha256: str
    size: int
    preview: str


class ArtifactStore:
    """artifact rows (content in the database, so every replica can read it)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def put(
        self,
        content: bytes | str,
        now: datetime,
        *,
        task_id: int | None = None,
        step_key: str | None = None,
        owner: str = "",
        name: str = "",
    ) -> ArtifactRef:
        """Store content; the same bytes for the same task and step give the same id."""
        data = content.encode() if isinstance(content, str) else content
        digest = sha256_text(data)
        art_id = sha256_text(f"{digest}:{task_id}:{step_key}")[:16]
        preview = data[: PREVIEW_CHARS * 4].decode("utf-8", "replace")[:PREVIEW_CHARS]
        with self.engine.begin() as conn:
            exists = conn.execute(select(artifact.c.id).where(artifact.c.id == art_id)).first()
            if not exists:
                conn.execute(
                    insert(artifact).values(
                        id=art_id,
                        task_id=task_id,
                        step_key=step_key,
                        owner=owner,
                        name=name,
                        sha256=digest,
                        size=len(data),
                        preview=preview,
                        content=data,
                        created_at=now,
                    )
                )
        return ArtifactRef(art_id, digest, len(data), preview)

    def get(self, art_id: str) -> tuple[ArtifactRef, bytes, str] | None:
        """(ref, content, owner) or None."""
        with self.engine.connect() as conn:
            row = conn.execute(select(artifact).where(artifact.c.id == art_id)).first()
        if row is None:
            return None
        m = row._mapping
        return ArtifactRef(m["id"], m["sha256"], m["size"], m["preview"]), bytes(m["content"]), m["owner"]

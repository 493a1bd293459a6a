"""Tool schemas are built once per registry (and again only for a tool swapped in by a reload)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field

from xihe.agent.registry import Registry, ToolSpec


class CountedArgs(BaseModel):
    """Arguments whose JSON schema counts how often it is built."""

    built: ClassVar[int] = 0
    name: str = Field(description="what to look at")

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        CountedArgs.built += 1
        return super().model_json_schema(*args, **kwargs)


def spec(description: str) -> ToolSpec:
    return ToolSpec("look", description, CountedArgs, run=lambda args, ctx: "ok")


def test_schemas_are_built_once_per_registry_and_rebuilt_for_a_replaced_tool() -> None:
    CountedArgs.built = 0
    registry = Registry([spec("look at one thing")])
    first = registry.schemas()
    for _ in range(50):  # a model request each
        assert registry.schemas() == first
    assert CountedArgs.built == 1
    assert first[0]["function"]["parameters"]["properties"]["name"] == {
        "description": "what to look at",
        "type": "string",
    }
    assert registry.replace(spec("look at two things"))  # a config reload swaps the tool in
    assert registry.schemas()[0]["function"]["description"] == "look at two things"
    assert CountedArgs.built == 2

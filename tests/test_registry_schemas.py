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


def test_added_and_removed_tools_keep_a_readers_snapshot() -> None:
    registry = Registry([spec("look at one thing")])
    held = registry.specs  # a turn in flight holds this
    other = ToolSpec("peek", "peek at it", CountedArgs, run=lambda args, ctx: "ok")
    assert registry.add_tool(other) and not registry.add_tool(other)  # a taken name is refused
    assert registry.names() == ["look", "peek"] and set(held) == {"look"}
    assert [s["function"]["name"] for s in registry.schemas()] == ["look", "peek"]
    held = registry.specs
    assert registry.remove_tool("look") and not registry.remove_tool("look")
    assert registry.names() == ["peek"] and set(held) == {"look", "peek"}
    assert [s["function"]["name"] for s in registry.schemas()] == ["peek"]

"""The delegation graph (seed 004 §2.2), the one place that says who may delegate to
whom. The root (a conversation's own agent, depth 0) may delegate to any active task
agent; a named agent follows its ``delegates``:

=============  ============================================
absent         the built-in general-purpose agent only
``[]``         nobody
``["*"]``      any active task agent but itself
a list         those
=============  ============================================

Self and every ancestor are refused whatever the definition says: a cycle is refused
when it is asked for, before any run row is written."""

from __future__ import annotations

from skald_host.core.agent.definitions import AgentDefinition
from skald_host.core.agent.subagents.catalog import Generation
from skald_host.core.agent.subagents.limits import GENERAL_PURPOSE
from skald_hookspecs.types import ToolError


class DelegationRefused(ToolError):
    """A delegation the graph or a limit does not allow; the message is for the model."""


def root_can_delegate(generation: Generation, target: str) -> bool:
    return generation.active(target) is not None


def can_delegate(generation: Generation, caller: AgentDefinition | None, target: str, ancestry: tuple[str, ...] = ()) -> bool:
    """``caller`` None is the root. ``ancestry``: the agent ids of the runs above the
    new one, the caller's own included."""
    if generation.active(target) is None:
        return False
    if caller is None:
        return not ancestry and root_can_delegate(generation, target)
    if target == caller.id or target in ancestry:
        return False
    if caller.delegates is None:
        return target == GENERAL_PURPOSE
    if caller.delegates == ("*",):
        return True
    return target in caller.delegates


def delegates_anyone(agent: AgentDefinition) -> bool:
    """Whether ``agent``'s definition lets it delegate to anyone at all, read from the
    definition alone (the round's tools are chosen on the path of every request): a
    task agent whose ``delegates`` is ``[]``, names only itself, or is absent in the
    general-purpose agent itself (its default target) may not, and is not offered
    ``execute_task`` (its every call would be refused, a round wasted). Any other
    agent is a conversation's own (the root), which may delegate to every task agent.
    Which targets a call may reach stays ``can_delegate``'s to say."""
    if agent.kind != "task":
        return True
    if agent.delegates is None:
        return agent.id != GENERAL_PURPOSE
    return any(target != agent.id for target in agent.delegates)


def delegate_targets(generation: Generation, caller: AgentDefinition | None, ancestry: tuple[str, ...] = ()) -> list[AgentDefinition]:
    return [d for d in generation.task_agents() if can_delegate(generation, caller, d.id, ancestry)]


def resolve(generation: Generation, caller: AgentDefinition | None, target: str, ancestry: tuple[str, ...] = ()) -> AgentDefinition:
    """The target's definition, or ``DelegationRefused`` saying why."""
    definition = generation.active(target)
    if definition is None:
        raise DelegationRefused(f"no task agent named {target!r}; list_agents shows them")
    if caller is not None and (target == caller.id or target in ancestry):
        raise DelegationRefused(f"{target!r} is already running above this agent: delegating to it would be a cycle")
    if not can_delegate(generation, caller, target, ancestry):
        raise DelegationRefused(f"{caller.id if caller else 'this agent'!r} may not delegate to {target!r}; list_agents shows whom it may")
    return definition

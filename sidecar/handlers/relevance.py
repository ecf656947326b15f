"""tools/relevant: the relevance ranking of the tools for a text, shown with scores."""

from __future__ import annotations

from typing import Literal

from ..api.relevance import RelevantTool, RelevantToolsParams, RelevantToolsResult
from ..api.tools import Tool
from ..chat import toolbox
from ..chat.chats import ChatService
from ..rpc import RequestContext
from ..tools.catalog import Catalog
from ..tools.relevance import Relevance
from ..tools.search import WithUsage
from ..tools.switch import ToolSwitch
from .routes import method


class RelevanceHandlers:
    def __init__(self, relevance: Relevance, chats: ChatService, catalog: Catalog, with_usage: WithUsage,
                 switch: ToolSwitch) -> None:
        self.relevance = relevance
        self.chats = chats
        self.catalog = catalog
        self.with_usage = with_usage
        self.switch = switch

    @method("tools/relevant")
    async def tools_relevant(self, p: RelevantToolsParams, ctx: RequestContext) -> RelevantToolsResult:
        shown: dict[str, Tool] = {}
        ids: list[str] | None = None
        if p.chat_id is not None:
            if not self.switch.enabled:
                await self.chats.require(p.chat_id)  # an unknown chat is still NotFound
                return RelevantToolsResult([], self._ranking(p), fallback_reason=self._reason(p))
            shown = {t.id: t for t in (await toolbox.for_chat(self.chats, self.catalog, p.chat_id)).shown()}
            ids = list(shown)
        ranked = await self.relevance.rank(p.text, limit=p.limit, tool_ids=ids, mode=p.mode)
        tools = [t for r in ranked if (t := shown.get(r.tool_id) or self.relevance.tool(r.tool_id)) is not None]
        by_id = {t.id: t for t in await self.with_usage(tools)}
        return RelevantToolsResult([RelevantTool(by_id[r.tool_id], r.score, r.why) for r in ranked
                                    if r.tool_id in by_id], self._ranking(p), fallback_reason=self._reason(p))

    def _ranking(self, p: RelevantToolsParams) -> Literal["fused", "lexical", "embedding"]:
        return p.mode if p.mode == "lexical" or self.relevance.model.status().state == "loaded" else "lexical"

    def _reason(self, p: RelevantToolsParams) -> str | None:
        return None if self._ranking(p) == p.mode else self.relevance.fallback_reason()



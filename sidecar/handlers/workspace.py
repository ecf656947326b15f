from __future__ import annotations

import binascii

import anyio

from ..api.workspace import (
    Changes,
    DiffParams,
    FileEntry,
    FilesParams,
    FilesResult,
    GcParams,
    GcResult,
    Manifest,
    ManifestIdResult,
    ManifestParams,
    ManifestResult,
    ReadFileParams,
    ReadFileResult,
    UploadParams,
    UploadResult,
    WriteFileParams,
)
from ..chat.chats import ChatService
from ..errors import InvalidParams
from ..rpc import RequestContext
from ..store.manifests import ManifestRow
from ..workspace.service import WorkspaceService, encode_content
from .routes import method


def manifest_out(m: ManifestRow) -> Manifest:
    return Manifest(id=m.id, files=m.files, source=m.source, created_at=m.created_at,
                    parent_id=m.parent_id, source_ref=m.source_ref)


class WorkspaceHandlers:
    def __init__(self, workspace: WorkspaceService, chats: ChatService) -> None:
        self.workspace = workspace
        self.chats = chats

    @method("workspace/files")
    async def files(self, p: FilesParams, ctx: RequestContext) -> FilesResult:
        manifest_id, entries = await self.workspace.list_files(p.chat_id, p.manifest_id)
        return FilesResult([FileEntry(e.path, e.size, e.sha256) for e in entries], manifest_id)

    @method("workspace/readFile")
    async def read_file(self, p: ReadFileParams, ctx: RequestContext) -> ReadFileResult:
        content = await self.workspace.read_file(p.chat_id, p.path, p.manifest_id, p.max_bytes)
        text, b64 = encode_content(content.data)
        return ReadFileResult(content.path, content.size, content.sha256, text, b64)

    @method("workspace/writeFile")
    async def write_file(self, p: WriteFileParams, ctx: RequestContext) -> ManifestIdResult:
        if p.text is not None and p.base64 is None:
            data = p.text.encode("utf-8", "surrogatepass")
        elif p.base64 is not None and p.text is None:
            try:
                data = binascii.a2b_base64(p.base64.encode("ascii"), strict_mode=True)
            except (binascii.Error, UnicodeEncodeError) as exc:
                raise InvalidParams("params.base64", f"not valid base64: {exc}") from None
        else:
            raise InvalidParams("params", "give exactly one of text or base64")
        return ManifestIdResult(await self.workspace.write_file(p.chat_id, p.path, data))

    @method("workspace/upload")
    async def upload(self, p: UploadParams, ctx: RequestContext) -> UploadResult:
        token = p.work_done_token
        if token is None:
            uploaded = await self.workspace.upload(p.chat_id, p.paths, p.dest)
        else:
            async def progress(done: int, total: int) -> None:
                await ctx.progress(token, {"kind": "report", "percentage": min(100, done * 100 // max(total, 1)),
                                           "message": f"copied {done} of {total} bytes"})

            await ctx.progress(token, {"kind": "begin", "title": "uploading", "percentage": 0})
            try:
                uploaded = await self.workspace.upload(p.chat_id, p.paths, p.dest, progress)
            finally:
                with anyio.CancelScope(shield=True):  # a cancelled upload still ends its progress
                    await ctx.progress(token, {"kind": "end"})
        if uploaded is None:
            return UploadResult()
        manifest, added, modified = uploaded
        return UploadResult(manifest.id, added, modified)

    @method("workspace/manifest")
    async def manifest(self, p: ManifestParams, ctx: RequestContext) -> ManifestResult:
        if p.message_id is not None and p.manifest_id is not None:
            raise InvalidParams("params", "give messageId or manifestId, not both")
        manifest_id = p.manifest_id
        if p.message_id is not None:
            manifest_id = await self.chats.manifest_after(p.chat_id, p.message_id)
        elif manifest_id is None:
            manifest_id, _ = await self.workspace.manifest_files(p.chat_id, None)
        if manifest_id is None:
            return ManifestResult()
        return ManifestResult(manifest_out(await self.workspace.get_manifest(p.chat_id, manifest_id)))

    @method("workspace/diff")
    async def diff_(self, p: DiffParams, ctx: RequestContext) -> Changes:
        added, removed, modified = await self.workspace.diff(p.chat_id, p.from_, p.to)
        return Changes(added, removed, modified)

    @method("workspace/gc")
    async def gc(self, p: GcParams, ctx: RequestContext) -> GcResult:
        removed, freed = await self.workspace.gc(p.chat_id)
        return GcResult(removed, freed)


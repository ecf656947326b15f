from __future__ import annotations

import binascii
from typing import TYPE_CHECKING, Any

from ..api.errors import InvalidParams
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
from ..rpc import RequestContext
from ..store.manifests import ManifestRow
from ..workspace.service import encode_content

if TYPE_CHECKING:
    from ..app import Sidecar


def manifest_out(m: ManifestRow) -> Manifest:
    return Manifest(id=m.id, files=m.files, source=m.source, created_at=m.created_at,  # type: ignore[arg-type]
                    parent_id=m.parent_id, source_ref=m.source_ref)


def handlers(app: Sidecar) -> dict[str, Any]:
    ws = app.workspace

    async def files(p: FilesParams, ctx: RequestContext) -> FilesResult:
        manifest_id, entries = await ws.list_files(p.chat_id, p.manifest_id)
        return FilesResult([FileEntry(e.path, e.size, e.sha256) for e in entries], manifest_id)

    async def read_file(p: ReadFileParams, ctx: RequestContext) -> ReadFileResult:
        content = await ws.read_file(p.chat_id, p.path, p.manifest_id, p.max_bytes)
        text, b64 = encode_content(content.data)
        return ReadFileResult(content.path, content.size, content.sha256, text, b64)

    async def write_file(p: WriteFileParams, ctx: RequestContext) -> ManifestIdResult:
        if (p.text is None) == (p.base64 is None):
            raise InvalidParams("params", "give exactly one of text or base64")
        if p.text is not None:
            data = p.text.encode("utf-8", "surrogatepass")
        else:
            try:
                data = binascii.a2b_base64(p.base64.encode("ascii"), strict_mode=True)  # type: ignore[union-attr]
            except (binascii.Error, UnicodeEncodeError) as exc:
                raise InvalidParams("params.base64", f"not valid base64: {exc}") from None
        return ManifestIdResult(await ws.write_file(p.chat_id, p.path, data))

    async def upload(p: UploadParams, ctx: RequestContext) -> UploadResult:
        uploaded = await ws.upload(p.chat_id, p.paths, p.dest)
        if uploaded is None:
            return UploadResult()
        manifest, added, modified = uploaded
        return UploadResult(manifest.id, added, modified)

    async def manifest(p: ManifestParams, ctx: RequestContext) -> ManifestResult:
        if p.message_id is not None and p.manifest_id is not None:
            raise InvalidParams("params", "give messageId or manifestId, not both")
        manifest_id = p.manifest_id
        if p.message_id is not None:
            manifest_id = await app.chats.manifest_after(p.chat_id, p.message_id)
        elif manifest_id is None:
            manifest_id, _ = await ws.manifest_files(p.chat_id, None)
        if manifest_id is None:
            return ManifestResult()
        return ManifestResult(manifest_out(await ws.get_manifest(p.chat_id, manifest_id)))

    async def diff_(p: DiffParams, ctx: RequestContext) -> Changes:
        added, removed, modified = await ws.diff(p.chat_id, p.from_, p.to)
        return Changes(added, removed, modified)

    async def gc(p: GcParams, ctx: RequestContext) -> GcResult:
        removed, freed = await ws.gc(p.chat_id)
        return GcResult(removed, freed)

    return {"workspace/files": files, "workspace/readFile": read_file,
            "workspace/writeFile": write_file, "workspace/upload": upload,
            "workspace/manifest": manifest, "workspace/diff": diff_, "workspace/gc": gc}

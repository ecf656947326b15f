"""Put a tool process in the sandbox: the command line and environment one confined child gets.

    sandbox = Sandbox("auto")                     # settings.sandbox; probed at the first use
    jail = await sandbox.prepare([python, "-I", script], env=env, cwd=ws, workspace=ws,
                                 read_only=[toolset_dir], confinement=confinement)
    child = await spawn(jail.argv, env=jail.env, cwd=jail.cwd, pass_fds=jail.pass_fds, ...)
    jail.started(child)                           # the sandbox's own process group, for SIGINT
    # or, both at once:  child = await jail.spawn(label="toolset x", logger=log)

With bubblewrap the child is ``bwrap``, which starts the program in fresh namespaces; with Landlock
it is ``python -I landlock_exec.py`` that applies the rules and execs the program; with none it is
the program itself (rlimits only). The caller keeps its own limits either way.

On Windows (mechanism "none": nothing confines files or network there) every process is started
suspended, put in a Job Object of its own with the call's memory and process limits, and only then
resumed (sidecar/sandbox/windows.py); the job ends the whole tree when the child is stopped.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio.to_thread
import msgspec

from ..children import Child, spawn
from ..secrets import inherited
from . import bwrap, cgroups, seatbelt
from .detect import Choice, Detected, detect, probe, probed
from .policy import DEFAULT, Confinement

if TYPE_CHECKING:
    from .egress import Egress, NetworkPlan
    from .windows import JobApi

LimitsKind = Literal["cgroup-v2", "cgroup-v1", "rlimit", "job-object"]

log = logging.getLogger("sidecar.sandbox")

LANDLOCK_EXEC = Path(__file__).with_name("landlock_exec.py")
_LANDLOCK_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/sys")


class Jail(msgspec.Struct, kw_only=True):
    argv: list[str]
    env: dict[str, str]
    cwd: str
    mechanism: str
    pass_fds: tuple[int, ...] = ()
    info_fd: int | None = None  # read end of bwrap's --info-fd pipe
    network: NetworkPlan | None = None  # allowedHosts: the proxy that lives as long as the process
    jobs: JobApi | None = None  # Windows: the Job Object calls
    confinement: Confinement = DEFAULT  # the limits a Job Object is given

    async def spawn(self, *, label: str, cwd: str | os.PathLike[str] | None = None, **options: Any) -> Child:
        """``children.spawn`` of the confined command (``cwd``: where bwrap itself starts; the
        program starts in ``self.cwd``).

        Raises:
            OSError: the child could not be started (on Windows: or not put in its Job Object).
        """
        job = None
        try:
            if self.jobs is not None:
                from .windows import Job  # noqa: PLC0415 - Windows only; start-up imports nothing of it

                # Made and limited before the process exists, which starts suspended: not one
                # instruction of it, or a child of it, runs outside the job. A worker's first code is
                # ours and waits for a request, so assigning it after start would do; one path for
                # every tool process costs one call and leaves nothing to get wrong.
                job = Job(self.jobs, self.confinement)
                options["creationflags"] = options.get("creationflags", 0) | self.jobs.suspended
            child = await spawn(self.argv, env=self.env, cwd=self.cwd if cwd is None else cwd, label=label,
                                pass_fds=self.pass_fds, **options)
        except BaseException:
            self.started(None)
            if job is not None:
                job.close()
            raise
        if job is not None:
            try:
                job.adopt(child.pid)
            except OSError:
                job.close()
                self.started(None)
                await child.stop(stdin_grace=0, term_grace=0, kill_wait=1.0)  # still suspended: nothing ran
                raise
            child.contain(job)
        self.started(child)
        return child

    def started(self, child: Child | None) -> None:
        """Hand the sandbox's info to ``child`` (None: the spawn failed; the pipe is closed)."""
        for fd in self.pass_fds:
            os.close(fd)
        self.pass_fds = ()
        if self.network is not None:
            if child is None:
                self.network.close()
            else:
                child.on_stop(self.network.close)
            self.network = None
        if self.info_fd is not None:
            if child is None:
                os.close(self.info_fd)
            else:
                child.sandbox_info(self.info_fd)
            self.info_fd = None


def python_paths() -> list[str]:
    """What the sidecar's own Python needs to start a worker: its installation and its venv."""
    paths = {sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))}
    return sorted(p for p in paths if p)


class Sandbox:
    def __init__(self, choice: Choice = "auto", egress: Egress | None = None, jobs: JobApi | None = None,
                 record: Path | None = None) -> None:
        self.choice: Choice = choice
        # The allowedHosts proxies (sidecar/sandbox/egress.py); without it allowedHosts gets no network.
        self.egress = egress
        # Windows' Job Object calls (windows.JobApi), made when the first tool starts; elsewhere none.
        self._jobs = jobs
        self.record = record  # where the probe's finding is kept for the next start (detect.RECORD_FILE)
        self._private_tmp: str | None = None

    @property
    def private(self) -> tuple[str, ...]:
        """The app's data directory (where the probe's record lies), which no sandbox may show a process:
        the database, the secret file and every chat's workspace are there."""
        return (str(self.record.parent),) if self.record is not None else ()

    async def status(self) -> Detected:
        return await probe(self.choice, self.record)

    async def verify(self, reported: Detected, changed: Callable[[Detected], Awaitable[None]]) -> None:
        """Hold what ``initialize`` reported (perhaps from the last start's record) against the probe;
        ``changed`` announces a difference. The probe rewrites the record itself."""
        found = await self.status()
        if (found.mechanism, found.confined) == (reported.mechanism, reported.confined):
            return
        log.warning("tool sandbox: %s, not %s as initialize reported from the last start's record (something "
                    "changed on this machine since)%s", found.mechanism, reported.mechanism,
                    f": {found.warning}" if found.warning else "")
        await changed(found)

    async def limits(self) -> LimitsKind:
        """What enforces a call's memory and process limits (the first look sweeps leftovers: a thread)."""
        if self._jobs is not None or sys.platform == "win32":
            return "job-object"
        return (await anyio.to_thread.run_sync(cgroups.detect)).kind

    def jobs(self) -> JobApi | None:
        """The Job Object calls on Windows (whatever --sandbox says: they are limits, not confinement)."""
        if self._jobs is None and sys.platform == "win32":
            from .windows import kernel32  # noqa: PLC0415 - Windows only

            self._jobs = kernel32()
        return self._jobs

    def known(self) -> Detected | None:
        """The probe's finding once it is done; None before (never waits, never a record's)."""
        return probed(self.choice)

    def detected(self) -> Detected:
        """Synchronous, for callers that cannot wait (probes on this thread the first time)."""
        return detect(self.choice)

    async def prepare(
        self, argv: Sequence[str], *, env: dict[str, str], cwd: str, workspace: str | None,
        read_only: Sequence[str] = (), confinement: Confinement = DEFAULT,
    ) -> Jail:
        jail = await self._prepare(argv, env=env, cwd=cwd, workspace=workspace, read_only=read_only,
                                   confinement=confinement)
        jail.jobs = self.jobs()
        jail.confinement = confinement
        return jail

    async def _prepare(
        self, argv: Sequence[str], *, env: dict[str, str], cwd: str, workspace: str | None,
        read_only: Sequence[str], confinement: Confinement,
    ) -> Jail:
        found = await self.status()  # the probe's own finding: never the last start's record
        if found.mechanism != "none":
            # Coverage's settings (children.scrubbed_env keeps them for scripts/coverage) stay outside:
            # a confined process cannot write its data file beside the checkout, and coverage's
            # traceback about it landed in the tool's stderr and in its helpers' errors.
            env = {k: v for k, v in env.items() if not k.startswith("COVERAGE_PROCESS_")}
        if confinement.network != "none":
            # TLS needs the certificate authorities the environment names (a company CA may live
            # outside /etc/ssl, which the sandbox shows anyway).
            read_only = [*read_only, *inherited.certificate_paths(env)]
        # A missing extra path would stop bwrap: it is left out (the tool's write there fails).
        writable = [*([workspace] if workspace else []), *filter(os.path.exists, confinement.writable)]
        if found.mechanism == "bubblewrap" and found.bwrap is not None:
            info_read, info_write = os.pipe()
            os.set_blocking(info_read, False)
            binds = bwrap.Binds(read_only=tuple(read_only), writable=tuple(writable))
            plan = None
            if confinement.network == "allowedHosts" and self.egress is not None:
                plan = await self.egress.prepare(confinement, label=os.path.basename(argv[-1])[:40])
                argv = [*plan.argv_prefix, *argv]
            command = bwrap.command(found.bwrap, argv, binds=binds, network=confinement.network, cwd=cwd,
                                    info_fd=info_write, extra=plan.bwrap_args if plan else ())
            inside = env | {"HOME": bwrap.SANDBOX_HOME, "TMPDIR": "/tmp"} | (plan.env if plan else {})
            return Jail(argv=command, env=inside, cwd=cwd, mechanism=found.mechanism, pass_fds=(info_write,),
                        info_fd=info_read, network=plan)
        if found.mechanism == "seatbelt":
            plan = None
            if confinement.network == "allowedHosts":
                if self.egress is not None:
                    plan = await self.egress.prepare_loopback(confinement, label=os.path.basename(argv[-1])[:40])
                else:  # no proxy to go through: no network
                    confinement = msgspec.structs.replace(confinement, network="none")
            box = seatbelt.profile(confinement, workspace=workspace, read_only=read_only,
                                   proxy_port=plan.proxy_port if plan else None)
            return Jail(argv=box.argv(argv), env=env | (plan.env if plan else {}), cwd=cwd,
                        mechanism=found.mechanism, network=plan)
        if found.mechanism == "landlock":
            tmp = self._tmp()
            rules = {"read": [*_LANDLOCK_SYSTEM, *read_only, "/dev"], "write": [*writable, tmp, "/dev/null"],
                     "network": confinement.network}
            command = [sys.executable, "-I", str(LANDLOCK_EXEC), json.dumps(rules), *argv]
            return Jail(argv=command, env=env | {"HOME": tmp, "TMPDIR": tmp}, cwd=cwd, mechanism=found.mechanism)
        return Jail(argv=list(argv), env=env, cwd=cwd, mechanism="none")

    def _tmp(self) -> str:
        # Landlock cannot give each tool a fresh /tmp: they share one private folder instead of the
        # system's, where other programs' files are.
        if self._private_tmp is None or not os.path.isdir(self._private_tmp):
            self._private_tmp = tempfile.mkdtemp(prefix="covalt-tools-")
        return self._private_tmp

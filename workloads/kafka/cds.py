"""A class-data-sharing archive of Kafka's classes on each node, next to the
jars it was made from (`<libs>.jsa`): a broker then starts on about half
the CPU (here: 6 s to its port without it, 3 s with it), and each tool
JVM (StorageTool, the state read's commands) on two thirds. On two cores
where every run formats and starts three brokers, restarts killed ones and
runs half a dozen tools, that is most of what a run's set-up costs.

JDK 17 makes such an archive only as a JVM exits normally
(-XX:ArchiveClassesAtExit), and brokers end killed: so a broker of its own
is started once on the node's loopback (one node, its own ports, its own
throwaway directory), stopped by SIGTERM once it serves, and the archive it
left is checked by a JVM that must use it (-Xshare:on) before it is moved
into place. A truncated or stale archive is never used: the JVM maps it,
and one cut short crashes it (SIGBUS); one made from other jars (the
classpath's files and times are recorded in it) is refused by that check
and made again. A missing archive costs nothing: the flag is ignored."""

from __future__ import annotations

import shlex
import time

from harness.nodes.remote import Remote, RemoteError

TRAINING_PORTS = (19092, 19093)  # on the node's 127.0.0.1 only, never its address
TRAINING_TIMEOUT = 120
CLUSTER_ID = "Y2RzLXRyYWluaW5nLTAwMA"  # any valid one: this broker is alone
QUIET = "-Xlog:cds=off,cds+dynamic=off"  # a missing archive says nothing


def archive(libs: str) -> str:
    return f"{libs}.jsa"


def sharing(libs: str) -> str:
    """The JVM flags that use the archive of `libs` (nothing if it is missing)."""
    return f"-XX:SharedArchiveFile={shlex.quote(archive(libs))} {QUIET}"


def training_script(libs: str, jvm: str) -> str:
    """Bash that leaves a checked archive at `archive(libs)` and says
    "present" or "made"; exits 3 when the training broker never served."""
    q = shlex.quote
    cp, a = f"{q(libs)}/'*'", q(archive(libs))
    port, controller = TRAINING_PORTS
    usable = f"java -Xshare:on -XX:SharedArchiveFile={{}} -cp {cp} -version >/dev/null 2>&1"
    props = "\\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
            "controller.listener.names=CONTROLLER",
            "log.dirs=$T/data",
        ]
    )
    return (
        f"{usable.format(a)} && echo present && exit 0; "
        "T=$(mktemp -d /tmp/queuecheck-cds.XXXXXX) || exit 1; trap 'rm -rf \"$T\"' EXIT; "
        f'printf "{props}\\n" > $T/server.properties; '
        f"java {jvm} -cp {cp} kafka.tools.StorageTool format --config $T/server.properties "
        f"--cluster-id {CLUSTER_ID} > $T/format.out 2>&1 || exit 1; "
        f"java -Xmx384m -XX:ArchiveClassesAtExit=$T/a.jsa -cp {cp} kafka.Kafka "
        "$T/server.properties > $T/out 2>&1 < /dev/null & pid=$!; "
        f"timeout {TRAINING_TIMEOUT} bash -c 'until (echo > /dev/tcp/127.0.0.1/{port}) "
        "2>/dev/null; do kill -0 '$pid' || exit 1; sleep 0.2; done' 2>/dev/null "
        f"|| {{ kill -KILL $pid; exit 3; }}; "
        # its archive is written as it exits: a stop that hangs gets no archive
        f"kill -TERM $pid; timeout 60 tail --pid=$pid -f /dev/null || kill -KILL $pid; wait $pid; "
        f"{usable.format('$T/a.jsa')} && mv -f $T/a.jsa {a} && echo made"
    )


def ensure_archive(node: Remote, libs: str, jvm: str) -> str:
    """Makes the node's archive of `libs` unless a usable one is there; says
    which, or why none was made (never raises: it only saves CPU)."""
    began = time.monotonic()
    script = training_script(libs, jvm)
    try:
        r = node.run(f"bash -c {shlex.quote(script)}", check=False, timeout=TRAINING_TIMEOUT + 90)
    except RemoteError as e:  # timed out, or the node went away: the run starts without
        return f"not made: {e}"
    said = r.out.strip()
    if r.exit != 0 or said not in ("present", "made"):
        return f"not made (exit {r.exit}): {(r.err or said).strip()[-200:]}"
    return said if said == "present" else f"made in {time.monotonic() - began:.1f} s"

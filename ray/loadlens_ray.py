#!/usr/bin/env python3
"""Places the segments of a loadlens load on the nodes of a Ray cluster.

`loadlens run URL ... --ray ADDRESS --clients N` writes its job as JSON on this
script's stdin and reads the outcome from OUT_DIR/result.json:
  {"segments": [{"index": I, "file": PATH, "host": NAME}, ...],
   "missing": {"I": "why", ...}}                  or  {"error": "one line"}.

The loadlens binary travels to the nodes in a Ray runtime environment (its
working_dir), with the files the segments read ("files": [[NAME, PATH], ...]: the
body, a targets file and its bodies, a replayed log), which the segments' flags
name by NAME in that directory; nothing is copied by hand. One actor per node (hard node
affinity, spread over the alive nodes) first gets ready (the runtime environment
set up), then all run `loadlens run ... --segment I/N --start-at T --json -` due
at the same instant. Every wait is bounded: a node that dies or a segment that
does not finish in time is reported missing, never waited for. The merge is
loadlens's own, back in the caller.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

# Seconds between the moment every segment is ready and their common start: enough
# for the start call to reach every node.
START_LEAD_S = 3.0


class Refused(Exception):
    """A job that cannot be run as asked: one line for the user."""


def log(job, msg):
    if not job.get("quiet"):
        print(f"ray: {msg}", file=sys.stderr, flush=True)


def die_with_parent():
    """In the segment's child: end when the Ray worker that started it ends (a node
    that dies takes its load with it)."""
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def pick_nodes(nodes, clients, server_resource):
    """The nodes that send load: alive, with CPUs, not the server's node; head last
    (it coordinates the cluster).

    >>> node = lambda i, alive=True, **res: {"NodeID": i, "Alive": alive, "Resources": res}
    >>> nodes = [node("a", CPU=2, **{"node:__internal_head__": 1}), node("b", CPU=1),
    ...          node("c", alive=False, CPU=4), node("d"), node("e", CPU=8, server=1)]
    >>> [n["NodeID"] for n in pick_nodes(nodes, 2, "server")]
    ['b', 'a']
    >>> [n["NodeID"] for n in pick_nodes(nodes, 1, None)]
    ['b']
    >>> pick_nodes(nodes, 3, "server")
    Traceback (most recent call last):
    ...
    loadlens_ray.Refused: --clients 3 but the Ray cluster has 2 alive node(s) with CPUs to place them on (one segment per node, not the server node)
    """
    usable = [
        n
        for n in nodes
        if n.get("Alive")
        and n.get("Resources", {}).get("CPU", 0) > 0
        and not (server_resource and n.get("Resources", {}).get(server_resource))
    ]
    usable.sort(key=lambda n: (bool(n.get("Resources", {}).get("node:__internal_head__")), n["NodeID"]))
    if len(usable) < clients:
        raise Refused(
            f"--clients {clients} but the Ray cluster has {len(usable)} alive node(s) with CPUs "
            f"to place them on (one segment per node{', not the server node' if server_resource else ''})"
        )
    return usable[:clients]


def server_node(nodes, resource):
    """The alive node with the server's custom resource, if one was named.

    >>> server_node([{"NodeID": "a", "Alive": True, "Resources": {"server": 1}}], "server")["NodeID"]
    'a'
    >>> server_node([], None) is None
    True
    """
    if not resource:
        return None
    for n in nodes:
        if n.get("Alive") and n.get("Resources", {}).get(resource):
            return n
    raise Refused(
        f"--server-node-resource {resource}: no alive node of the Ray cluster has that custom resource "
        f"(start the server's node with `ray start ... --resources '{{\"{resource}\": 1}}'`)"
    )


def package(binary, files=()):
    """A directory holding the binary and the files the segments read, for the
    runtime environment's working_dir. Debug sections are left out (smaller upload);
    the code is the same.

    >>> src = tempfile.mkdtemp()
    >>> for name, text in [("bin", "#!"), ("t", "/a\\n")]:
    ...     with open(os.path.join(src, name), "w") as f: _ = f.write(text)
    >>> pkg = package(os.path.join(src, "bin"), [["targets.jsonl", os.path.join(src, "t")]])
    >>> sorted(os.listdir(pkg)), open(os.path.join(pkg, "targets.jsonl")).read()
    (['loadlens', 'targets.jsonl'], '/a\\n')
    >>> package(os.path.join(src, "bin"), [["../x", os.path.join(src, "t")]])
    Traceback (most recent call last):
    ...
    ValueError: a shipped file's name must be a plain file name: '../x'
    >>> shutil.rmtree(pkg); shutil.rmtree(src)
    """
    pkg = tempfile.mkdtemp(prefix="loadlens-ray-pkg")
    try:
        dest = os.path.join(pkg, "loadlens")
        stripped = shutil.which("objcopy") and subprocess.run(
            ["objcopy", "--strip-debug", binary, dest], capture_output=True
        ).returncode == 0
        if not stripped:
            shutil.copyfile(binary, dest)
        os.chmod(dest, 0o755)
        for name, src in files:
            if os.path.basename(name) != name or name in ("", ".", "..", "loadlens"):
                raise ValueError(f"a shipped file's name must be a plain file name: {name!r}")
            shutil.copyfile(src, os.path.join(pkg, name))
    except BaseException:
        shutil.rmtree(pkg, ignore_errors=True)
        raise
    return pkg


def run(job):
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError as e:
        raise Refused(
            f"Ray is not installed for {sys.executable} ({e}): run scripts/install-deps.sh ray, or set LOADLENS_PYTHON"
        )

    clients = job["clients"]
    try:
        pkg = package(job["binary"], job.get("files", []))
    except OSError as e:
        raise Refused(f"cannot gather the files to ship to the nodes: {one_line(e)}")
    try:
        try:
            # The binary and the files go to every node with the job's runtime environment.
            ray.init(
                address=job["address"],
                logging_level="ERROR",
                log_to_driver=False,
                runtime_env={"working_dir": pkg},
            )
        except Exception as e:  # Ray raises several kinds for an unreachable cluster
            if "Package size" in str(e):
                raise Refused(
                    f"the loadlens binary and the files the segments read (targets, bodies, log) are too large "
                    f"for Ray's runtime environment: {one_line(e)}"
                )
            raise Refused(f"cannot connect to the Ray cluster at {job['address']}: {one_line(e)}")
        all_nodes = ray.nodes()
        nodes = pick_nodes(all_nodes, clients, job.get("server_node_resource"))
        server = server_node(all_nodes, job.get("server_node_resource"))
        return place_and_run(ray, NodeAffinitySchedulingStrategy, job, nodes, server)
    finally:
        shutil.rmtree(pkg, ignore_errors=True)


def place_and_run(ray, affinity, job, nodes, server):
    n = len(nodes)

    @ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)
    class Segment:
        def ready(self):
            return socket.gethostname()

        def run(self, args, timeout_s):
            exe = os.path.join(os.getcwd(), "loadlens")
            os.chmod(exe, 0o755)
            try:
                p = subprocess.run(
                    [exe, "run", *args],
                    capture_output=True,
                    timeout=timeout_s,
                    preexec_fn=die_with_parent,
                )
            except subprocess.TimeoutExpired:
                return {"code": None, "stdout": "", "stderr": f"no result within {timeout_s:.0f}s"}
            return {
                "code": p.returncode,
                "stdout": p.stdout.decode(errors="replace"),
                "stderr": p.stderr.decode(errors="replace")[-2000:],
            }

    @ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)
    class Watcher:
        """The watch on the server's node, from the common start until told to stop."""

        def ready(self):
            return socket.gethostname()

        def start(self, args):
            exe = os.path.join(os.getcwd(), "loadlens")
            os.chmod(exe, 0o755)
            self.proc = subprocess.Popen(
                [exe, "watch", *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                preexec_fn=die_with_parent,
            )

        def stop(self):
            out, err = self.proc.communicate(input=b"", timeout=60)
            return {
                "code": self.proc.returncode,
                "stdout": out.decode(errors="replace"),
                "stderr": err.decode(errors="replace")[-2000:],
            }

    watcher = None
    if server is not None:
        watcher = Watcher.options(scheduling_strategy=affinity(node_id=server["NodeID"], soft=False)).remote()
    actors = {
        i + 1: Segment.options(
            scheduling_strategy=affinity(node_id=node["NodeID"], soft=False),
        ).remote()
        for i, node in enumerate(nodes)
    }
    missing = {}
    hosts = {}
    ready = {actors[i].ready.remote(): i for i in actors}
    watcher_ready = watcher.ready.remote() if watcher else None
    done, pending = ray.wait(list(ready), num_returns=len(ready), timeout=job["ready_timeout_s"])
    server_host = None
    server_error = None
    if watcher:
        try:
            server_host = ray.get(watcher_ready, timeout=job["ready_timeout_s"])
        except Exception as e:
            server_error = f"the watch on the server's node did not start: {one_line(e)}"
            watcher = None
    for ref in done:
        i = ready[ref]
        try:
            hosts[i] = ray.get(ref)
        except Exception as e:
            missing[i] = f"did not start: {one_line(e)}"
    for ref in pending:
        missing[ready[ref]] = f"did not start within {job['ready_timeout_s']:.0f}s"
    for i in missing:
        ray.kill(actors[i])
    started = [i for i in actors if i not in missing]
    if not started:
        return {"segments": [], "missing": missing}

    start_at = time.time() + START_LEAD_S
    if watcher:
        ray.get(watcher.start.remote([*job["watch_args"], "--start-at", f"{start_at:.3f}"]), timeout=60)
    timeout_s = job["run_timeout_s"]
    log(job, f"{len(started)} of {n} segments on {', '.join(hosts[i] for i in started)}, starting at {start_at:.3f}")
    runs = {
        actors[i].run.remote(
            [*job["args"], "--segment", f"{i}/{n}", "--start-at", f"{start_at:.3f}", "--json", "-", "-q"],
            timeout_s,
        ): i
        for i in started
    }
    deadline = start_at + timeout_s + 10.0
    segments = []
    pending = list(runs)
    while pending:
        left = deadline - time.time()
        if left <= 0:
            break
        done, pending = ray.wait(pending, num_returns=1, timeout=left)
        for ref in done:
            i = runs[ref]
            try:
                out = ray.get(ref)
            except Exception as e:
                missing[i] = f"its node or worker died: {one_line(e)}"
                continue
            if out["code"] != 0:
                last = out["stderr"].strip().splitlines()
                missing[i] = f"loadlens failed on {hosts[i]}: {last[-1] if last else out['code']}"
                continue
            path = os.path.join(job["out_dir"], f"segment-{i}.json")
            with open(path, "w") as f:
                f.write(out["stdout"])
            segments.append({"index": i, "file": path, "host": hosts[i]})
    for ref in pending:
        i = runs[ref]
        missing[i] = f"no result within {timeout_s:.0f}s of the start"
        ray.kill(actors[i])
    result = {"segments": sorted(segments, key=lambda s: s["index"]), "missing": missing}
    if watcher:
        try:
            out = ray.get(watcher.stop.remote(), timeout=90)
            if out["code"] == 0:
                path = os.path.join(job["out_dir"], "server-evidence.json")
                with open(path, "w") as f:
                    f.write(out["stdout"])
                result["server"] = {"file": path, "host": server_host}
            else:
                last = out["stderr"].strip().splitlines()
                server_error = f"the watch on the server's node failed: {last[-1] if last else out['code']}"
        except Exception as e:
            server_error = f"the watch on the server's node ended without evidence: {one_line(e)}"
    if server_error:
        result["server_error"] = server_error
    return result


def one_line(e):
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:300]


def main():
    job = json.load(sys.stdin)
    try:
        result = run(job)
    except Refused as e:
        result = {"error": str(e)}
    except Exception as e:
        result = {"error": f"Ray failed: {one_line(e)}"}
    # A file, not stdout: Ray may print there too.
    with open(os.path.join(job["out_dir"], "result.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()

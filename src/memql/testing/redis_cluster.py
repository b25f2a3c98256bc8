"""A Redis Cluster of its own on free loopback ports: masters (each with `replicas` replicas),
all slots assigned, for the broadcast over sharded pub/sub. A slot moves (`move_slot`) and a
master dies (`kill`) at will."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from memql.testing.server import RedisProcess, free_port


def _cli(*args: str, timeout: float = 30) -> str:
    done = subprocess.run(["redis-cli", *args], capture_output=True, check=True, timeout=timeout)
    return done.stdout.decode().strip()


class RedisClusterGroup:
    """`url` (`redis+cluster://127.0.0.1:<port>,127.0.0.1:<port>,.../`) names every master as
    a seed. `masters` are the nodes that own slots at the start, in slot order."""

    def __init__(self, workdir: Path, masters: int = 3, replicas: int = 0) -> None:
        self.nodes: list[RedisProcess] = []
        for n in range(masters * (1 + replicas)):
            home = workdir / f"node{n}"
            home.mkdir(parents=True, exist_ok=True)
            node = RedisProcess(
                home,
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(home / "nodes.conf"),
                # its own free port for the cluster bus (port + 10000 may not exist)
                "--cluster-port", str(free_port()),
                # a master silent for a second is failed over (when it has replicas)
                "--cluster-node-timeout", "1000",
            )  # fmt: skip
            self.nodes.append(node)
        try:
            for node in self.nodes:
                node.start()
            # redis-cli makes the first `masters` addresses masters, the rest their replicas
            _cli(
                "--cluster", "create", *(f"127.0.0.1:{node.port}" for node in self.nodes),
                "--cluster-replicas", str(replicas), "--cluster-yes",
                timeout=60,
            )  # fmt: skip
            self.masters = self.nodes[:masters]
            self.url = "redis+cluster://" + ",".join(f"127.0.0.1:{m.port}" for m in self.masters)
            self.url += "/"
            self.wait(self._settled, "the cluster to agree on its slots")
        except BaseException:
            self.stop()
            raise

    def cli(self, port: int, *args: str) -> str:
        return _cli("-p", str(port), *args)

    def node_id(self, port: int) -> str:
        return self.cli(port, "cluster", "myid")

    def keyslot(self, name: str) -> int:
        return int(self.cli(self.masters[0].port, "cluster", "keyslot", name))

    def owner(self, slot: int, asking: int | None = None) -> int:
        """The port of the master owning `slot`, as the node on port `asking` sees it."""
        port = asking if asking is not None else self._alive()[0].port
        for line in self.cli(port, "cluster", "nodes").splitlines():
            fields = line.split()
            flags = fields[2].split(",")
            if "master" not in flags or "fail" in flags:
                continue
            for held in fields[8:]:
                if held.startswith("["):
                    continue  # a slot being migrated or imported
                low, _, high = held.partition("-")
                if int(low) <= slot <= int(high or low):
                    return int(fields[1].split(":")[1].split("@")[0])
        raise LookupError(f"no master owns slot {slot}")

    def move_slot(self, slot: int, to: int) -> None:
        """Move `slot` to the master on port `to` as `redis-cli --cluster reshard` does, one
        step at a time: IMPORTING on the target, MIGRATING on the source, then NODE on the
        target, the source and every other master. (No keys are moved: pub/sub holds none.)"""
        source = self.owner(slot)
        if source == to:
            return
        target_id, source_id = self.node_id(to), self.node_id(source)
        self.cli(to, "cluster", "setslot", str(slot), "importing", source_id)
        self.cli(source, "cluster", "setslot", str(slot), "migrating", target_id)
        self.cli(to, "cluster", "setslot", str(slot), "node", target_id)
        self.cli(source, "cluster", "setslot", str(slot), "node", target_id)
        for node in self._alive():
            if node.port not in (to, source) and self._is_master(node.port):
                self.cli(node.port, "cluster", "setslot", str(slot), "node", target_id)
        self.wait(lambda: all(self.owner(slot, n.port) == to for n in self._alive()), "the move")

    def kill(self, port: int) -> None:
        """SIGKILL the node on `port`, as in a crash."""
        for node in self.nodes:
            if node.port == port:
                node.kill()

    def _alive(self) -> list[RedisProcess]:
        return [n for n in self.nodes if n._proc is not None and n._proc.poll() is None]

    def _is_master(self, port: int) -> bool:
        return "role:master" in self.cli(port, "info", "replication")

    def _settled(self) -> bool:
        """Every node sees every slot served, and every replica has its master's data (a
        replica that never synced does not take over)."""
        try:
            for node in self._alive():
                if "cluster_state:ok" not in self.cli(node.port, "cluster", "info"):
                    return False
                replication = self.cli(node.port, "info", "replication")
                if "role:slave" in replication and "master_link_status:up" not in replication:
                    return False
            return True
        except subprocess.CalledProcessError:
            return False

    def wait(self, done: Callable[[], bool], what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done():
                return
            time.sleep(0.05)
        raise RuntimeError(f"timed out waiting for {what}")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

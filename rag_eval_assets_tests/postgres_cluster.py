"""A throw-away PostgreSQL cluster from Debian's binaries, on loopback and a free port, for the tests."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rag_eval_assets_tests.dagster_server import free_port
from rag_eval_assets_tests.real_components import unavailable


@dataclass(frozen=True)
class Cluster:
    port: int
    user: str
    password: str
    db_name: str

    def env(self) -> dict[str, str]:
        """The DAGSTER_PG_* variables deploy/nightly/dagster.yaml reads."""
        return {
            "DAGSTER_PG_HOST": "127.0.0.1",
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_DB": self.db_name,
            "DAGSTER_PG_USER": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
        }


def _bin_dir() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    return found[-1].parent if found else None


@contextmanager
def postgres_cluster() -> Iterator[Cluster]:
    """initdb + pg_ctl start in a temporary directory, a `dagster` role with a password and its database; stopped
    and removed on exit. initdb refuses to run as root, so as root the cluster belongs to Debian's `postgres` user
    (and lives under /tmp, not under pytest's root-only tmp_path)."""
    with tempfile.TemporaryDirectory(prefix="rag-eval-pg-") as tmp:
        yield from _cluster(Path(tmp))


def _cluster(directory: Path) -> Iterator[Cluster]:
    bin_dir = _bin_dir()
    if bin_dir is None:
        unavailable("Debian's postgresql package is not installed (`make test` installs it as root)")
    as_user: list[str] = []
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            unavailable("no `postgres` user to own the throw-away cluster")
        as_user = ["runuser", "-u", "postgres", "--"]
    data, sockets = directory / "pgdata", directory / "pgsock"
    for path in (directory, data, sockets):
        path.mkdir(exist_ok=True)
        if as_user:
            shutil.chown(path, owner.pw_uid, owner.pw_gid)
    port = free_port()
    cluster = Cluster(port=port, user="dagster", password="nightly-test", db_name="dagster")

    def run(tool: str, *args: str) -> None:
        subprocess.run([*as_user, str(bin_dir / tool), *args], check=True, capture_output=True, cwd=directory)

    run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust")
    run("pg_ctl", "-D", str(data), "-l", str(directory / "postgres.log"), "-w",
        "-o", f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1", "start")
    try:
        psql = ["psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-v", "ON_ERROR_STOP=1", "-c"]
        run(*psql, f"CREATE ROLE {cluster.user} LOGIN PASSWORD '{cluster.password}'")
        run(*psql, f"CREATE DATABASE {cluster.db_name} OWNER {cluster.user}")
        yield cluster
    finally:
        run("pg_ctl", "-D", str(data), "-m", "fast", "-w", "stop")

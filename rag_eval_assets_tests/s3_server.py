"""A real S3-compatible server on loopback for the tests: moto's standalone server (`python -m moto.server`), in its
own process group, reached only through the variables botocore and s3fs read (AWS_ENDPOINT_URL, the key pair, the
region), as a deployment reaches its object store (docs/deployment.md, "Storage on S3")."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pandas as pd

from rag_eval_assets_tests.dagster_server import free_port
from rag_eval_assets_tests.waiting import wait_until_answers

START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0
ACCESS_KEY_ID = "rag-eval-test"
DEFAULT_SECRET = "rag-eval-test-secret"
REGION = "us-east-1"
# Variables of the developer's own AWS setup that would point botocore elsewhere.
_FOREIGN = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE")


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    secret: str
    access_key: str = ACCESS_KEY_ID

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """`base` (default os.environ) with the variables that point botocore at this server."""
        env = {k: v for k, v in (os.environ if base is None else base).items() if k not in _FOREIGN}
        return {**env, "AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret, "AWS_DEFAULT_REGION": REGION}

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret, region_name=REGION)

    def create_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return f"s3://{name}"

    def objects(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        """Every object under `prefix`: key -> bytes."""
        client = self.client()
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        keys = [item["Key"] for page in pages for item in page.get("Contents", [])]
        return {key: client.get_object(Bucket=bucket, Key=key)["Body"].read() for key in keys}

    def table(self, bucket: str, key: str) -> pd.DataFrame:
        body = self.client().get_object(Bucket=bucket, Key=key)["Body"].read()
        return pd.read_parquet(io.BytesIO(body))


def _forget_clients() -> None:
    # fsspec keeps one S3FileSystem per set of options for the life of the process, with the endpoint it read from
    # the environment when first used: a later server (another port) would never be reached.
    from s3fs import S3FileSystem

    S3FileSystem.clear_instance_cache()


# IAM calls that make the signing user while moto still answers unsigned requests (INITIAL_NO_AUTH_ACTION_COUNT).
_MAKING_THE_USER = 3


def _signing_user(endpoint: str) -> S3Server:
    """A user allowed everything, made through moto's IAM: from then on moto checks every request's signature."""
    import boto3

    iam = boto3.client("iam", endpoint_url=endpoint, aws_access_key_id="setup", aws_secret_access_key="setup",
                       region_name=REGION)
    iam.create_user(UserName="rag-eval")
    key = iam.create_access_key(UserName="rag-eval")["AccessKey"]
    allow_all = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    iam.put_user_policy(UserName="rag-eval", PolicyName="all", PolicyDocument=json.dumps(allow_all))
    return S3Server(endpoint, key["SecretAccessKey"], key["AccessKeyId"])


@contextmanager
def s3_server(secret: str = DEFAULT_SECRET, signed: bool = False) -> Iterator[S3Server]:
    """moto's server on a free loopback port until the block ends; the AWS secret key its clients use is `secret`.
    `signed`: moto refuses (403) a request not signed by the key pair of the S3Server yielded (its own secret)."""
    from rag_eval_assets_tests.real_components import unavailable

    try:
        import moto.server  # noqa: F401  (the test extra installs moto[server])
        import s3fs  # noqa: F401
    except ImportError as exc:
        unavailable(f"moto[server] and s3fs are needed for the S3 tests: {exc}")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(_MAKING_THE_USER)} if signed else None
        server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        try:
            wait_until_answers(server, f"{endpoint}/moto-api/data.json", "moto.server", log, START_TIMEOUT)
            _forget_clients()
            yield _signing_user(endpoint) if signed else S3Server(endpoint, secret)
        finally:
            _forget_clients()
            _stop(server)


def _stop(server: subprocess.Popen) -> None:
    """The server's own pid only: moto's server starts no other process."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if server.poll() is not None:
            return
        os.kill(server.pid, sig)
        try:
            server.wait(timeout=STOP_TIMEOUT)
            return
        except subprocess.TimeoutExpired:
            continue

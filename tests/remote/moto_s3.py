#!/usr/bin/env python3
"""moto_s3.py - moto's S3 in server mode on 127.0.0.1 (a free port) for tests/remote/moto_test.cpp.

Usage: moto_s3.py FIXTURES_DIR BUCKET REGION KEY...

Starts moto's threaded server on port 0, makes an IAM user with an access key and a policy
allowing s3:*, a role that user may assume (temporary credentials: a session token), and then
turns authentication on: from there every request, boto3's uploads and maploc's reads alike,
must carry a SigV4 signature moto recomputes from a key it knows (403 otherwise). It creates
BUCKET in REGION and uploads FIXTURES_DIR/KEY as KEY for each KEY, then prints one line

    PORT <port> <key id> <secret> <temporary key id> <temporary secret> <session token>

and serves until killed. Commands on stdin, one a line, each answered "OK" or "ERROR ...":
    put KEY PATH   uploads PATH as KEY (a new ETag: the object changed)

Without moto or boto3 it prints "ERROR ..." naming what to run (tools/install-deps.sh test)
and exits 3: the test fails with that message, it never skips.
"""
import json
import logging
import os
import sys


def main():
    if len(sys.argv) < 4:
        print("ERROR usage: moto_s3.py FIXTURES_DIR BUCKET REGION KEY...", flush=True)
        return 2
    fixtures, bucket, region, keys = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    try:
        import boto3
        import moto.settings
        from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    except ImportError as e:
        print(f"ERROR {sys.executable} cannot import moto[server] and boto3 ({e}): "
              "run bash tools/install-deps.sh test (it installs them into .cache/safetensors-venv)", flush=True)
        return 3

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request on stderr
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    port = server.get_host_and_port()[1]
    endpoint = f"http://127.0.0.1:{port}"

    # Set up while moto authenticates nothing (its default), with throwaway keys.
    setup = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup",
                 aws_secret_access_key="setup")
    iam = boto3.client("iam", **setup)
    allow_s3 = json.dumps({"Version": "2012-10-17",
                           "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]})
    iam.create_user(UserName="maploc")
    iam.put_user_policy(UserName="maploc", PolicyName="s3", PolicyDocument=allow_s3)
    key = iam.create_access_key(UserName="maploc")["AccessKey"]
    trust = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]})
    role = iam.create_role(RoleName="maploc-reader", AssumeRolePolicyDocument=trust)["Role"]
    iam.put_role_policy(RoleName="maploc-reader", PolicyName="s3", PolicyDocument=allow_s3)
    sts = boto3.client("sts", **setup)
    temp = sts.assume_role(RoleArn=role["Arn"], RoleSessionName="maploc-test")["Credentials"]

    # From here every request is authenticated: signature and permission.
    moto.settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name=region, aws_access_key_id=key["AccessKeyId"],
                      aws_secret_access_key=key["SecretAccessKey"])
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": region})
    for k in keys:
        s3.upload_file(os.path.join(fixtures, k), bucket, k)

    print(f"PORT {port} {key['AccessKeyId']} {key['SecretAccessKey']} {temp['AccessKeyId']} "
          f"{temp['SecretAccessKey']} {temp['SessionToken']}", flush=True)
    for line in sys.stdin:
        words = line.split()
        try:
            if len(words) == 3 and words[0] == "put":
                s3.upload_file(words[2], bucket, words[1])
                print("OK", flush=True)
            else:
                print(f"ERROR unknown command: {line.strip()}", flush=True)
        except Exception as e:  # noqa: BLE001 - reported to the test, which fails on it
            print(f"ERROR {type(e).__name__}: {e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Minimal Python client of apply_edit's gRPC API: stream a rewritten file to stdout, stats to stderr.

    python proto/examples/client.py HOST:PORT FILE SNIPPET [INSTRUCTION]

Needs grpcio and the generated modules (`pip install -e .` in the repo makes both available).
"""

import sys

import grpc

from apply_edit.v1 import apply_edit_pb2 as pb
from apply_edit.v1 import apply_edit_pb2_grpc as pb_grpc


def main(address: str, file: str, snippet: str, instruction: str = "") -> int:
    request = pb.ApplyRequest(
        original=open(file, encoding="utf-8", newline="").read(),
        update=open(snippet, encoding="utf-8", newline="").read(),
        instruction=instruction,
        path=file,
    )
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.ApplyEditStub(channel)
        try:
            for response in stub.Apply(request, timeout=600):
                sys.stdout.write(response.text)
                sys.stdout.flush()
                if response.HasField("stats"):
                    s = response.stats
                    print(f"{s.new_tokens} tokens, {s.target_passes} passes, {s.total_s:.2f}s", file=sys.stderr)
        except grpc.RpcError as err:
            print(f"{err.code().name}: {err.details()}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

"""Minimal Python client of apply_edit's gRPC API: the rewritten file to stdout, progress and stats to stderr.

The file is assembled as it streams and written once the last response arrived: FAILED_PRECONDITION
after some text means no sound result was found, and then nothing is written.

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
        text = ""
        try:
            for response in stub.Apply(request, timeout=600):
                text += response.text
                print(f"\r{response.tokens} tokens", end="", file=sys.stderr, flush=True)
                if response.HasField("stats"):
                    s = response.stats
                    print(f"\r{s.new_tokens} tokens, {s.target_passes} passes, {s.total_s:.2f}s, path {s.path}",
                          file=sys.stderr)
                    sys.stdout.write(text)
        except grpc.RpcError as err:
            print(f"\n{err.code().name}: {err.details()}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

#!/usr/bin/python3
# A client of microvmd's console bridge, for the tests: Python's
# websockets library, as a remote client would use it.
#
#   ws-console.py URL TOKEN [--send TEXT]... [--expect TEXT] [--resize R C]
#                 [--wait-close] [--timeout S] [--query &K=V...] [--ca CERT]
#                 [--flood N]
#
# Sends each TEXT (with "\n" for a newline) as a binary message, after a
# resize message if asked, and reads until the output holds EXPECT. Prints
# the output, then "closed CODE REASON" if the bridge closed the session
# (with --wait-close, it waits for that). Exits 0, 3 if the session was
# closed before EXPECT came, 4 on a timeout.
import argparse
import asyncio
import json
import ssl
import sys

import websockets


def closed_line(e):
    code = getattr(e, "code", None)
    reason = getattr(e, "reason", "")
    rcvd = getattr(e, "rcvd", None)
    if rcvd is not None:
        code, reason = rcvd.code, rcvd.reason
    return f"closed {code} {reason}"


async def session(args):
    url = f"{args.url}?token={args.token}{args.query}"
    output = b""
    context = None
    if url.startswith("wss://"):
        # The test's own certificate, made for the occasion.
        context = ssl.create_default_context(cafile=args.ca)
        context.check_hostname = False
    async with websockets.connect(url, max_size=1 << 20, ssl=context) as ws:
        try:
            if args.resize:
                await ws.send(json.dumps({"resize": {"rows": args.resize[0],
                                                     "cols": args.resize[1]}}))
            for text in args.send:
                await ws.send(text.replace("\\n", "\n").encode())
            for _ in range(args.flood):
                await ws.send(b"x" * 60000)
            if args.expect:
                while args.expect.encode() not in output:
                    message = await asyncio.wait_for(ws.recv(), args.timeout)
                    if isinstance(message, bytes):
                        output += message
            if args.wait_close:
                while True:
                    message = await asyncio.wait_for(ws.recv(), args.timeout)
                    if isinstance(message, bytes):
                        output += message
        except websockets.exceptions.ConnectionClosed as e:
            sys.stdout.write(output.decode(errors="replace"))
            print()
            print(closed_line(e))
            return 0 if args.wait_close else 3
        except asyncio.TimeoutError:
            sys.stdout.write(output.decode(errors="replace"))
            print()
            print("timeout")
            return 4
    sys.stdout.write(output.decode(errors="replace"))
    print()
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("token")
    p.add_argument("--send", action="append", default=[])
    p.add_argument("--expect")
    p.add_argument("--resize", nargs=2, type=int)
    p.add_argument("--wait-close", action="store_true")
    p.add_argument("--timeout", type=float, default=30)
    p.add_argument("--query", default="", help="more of the query, from its &")
    p.add_argument("--flood", type=int, default=0, help="then send this many 60000-byte messages")
    p.add_argument("--ca", help="the certificate a wss:// bridge must have")
    args = p.parse_args()
    try:
        return asyncio.run(session(args))
    except websockets.exceptions.ConnectionClosed as e:
        print(closed_line(e))
        return 3


if __name__ == "__main__":
    sys.exit(main())

# A small TCP relay started inside the runner container (bot.services) and the devcontainer's
# app service (bot.compile.compose): CI jobs reach services on localhost (the runner maps the ports),
# and many test suites hard-code "localhost:5432" where no variable can redirect them. Each argument
# is LISTEN_PORT:HOST:PORT. Standard library only: it runs on the analysed repository's interpreter.
import asyncio
import errno
import sys


async def pipe(r, w):
    try:
        while data := await r.read(65536):
            w.write(data); await w.drain()
    except Exception:
        pass
    finally:
        w.close()
def handler(host, port):
    async def handle(r1, w1):
        try:
            r2, w2 = await asyncio.open_connection(host, port)
        except OSError:
            w1.close(); return
        await asyncio.gather(pipe(r1, w2), pipe(r2, w1))
    return handle
async def main():
    servers, busy = [], 0
    for spec in sys.argv[1:]:
        listen, host, port = spec.split(":")
        for address in ("127.0.0.1", "::1"):
            try:
                servers.append(await asyncio.start_server(handler(host, int(port)), address, int(listen)))
            except OSError as exc:
                busy += exc.errno == errno.EADDRINUSE
    if not servers:
        print("setupbot-forwarder ready (already running)" if busy else "setupbot-forwarder failed", flush=True)
        return
    print("setupbot-forwarder ready", " ".join(str(s.sockets[0].getsockname()[0]) for s in servers), flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))
asyncio.run(main())

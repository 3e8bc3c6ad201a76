"""`dialcheck ui`: the live verdict page (streams/ui) against any broker."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("ui", help="web page following chat.turns and chat.verdicts (Server-Sent Events)")
    p.add_argument("--broker", help="Kafka bootstrap HOST:PORT[,...] (default: DIALCHECK_KAFKA_BOOTSTRAP)")
    p.add_argument("--host", default=None, help="bind address (default: DIALCHECK_UI_HOST, 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default: DIALCHECK_UI_PORT, 8765; 0 = any free port)")
    p.add_argument("--max-conversations", type=int, default=None,
                   help="conversations kept in memory (default: DIALCHECK_UI_MAX_CONVERSATIONS, 200)")
    p.add_argument("--from-now", action="store_true",
                   help="show only what arrives from now on (default: read the topics from the beginning)")
    p.set_defaults(func=run)


def run(args) -> int:
    from schemas.settings import load_settings
    from streams.ui import serve

    s = load_settings(kafka={"bootstrap": args.broker or None},
                      ui={"host": args.host, "port": args.port, "max_conversations": args.max_conversations})
    if not s.kafka.bootstrap:
        from dialcheck.errors import UsageError

        raise UsageError("no broker: pass --broker HOST:PORT or set DIALCHECK_KAFKA_BOOTSTRAP "
                         "('dialcheck demo --ui' runs everything embedded)")
    from dialcheck.errors import check_port_free

    check_port_free(s.ui.host, s.ui.port, "--port")
    return serve(s, s.ui.host, s.ui.port, s.ui.max_conversations, from_beginning=not args.from_now)

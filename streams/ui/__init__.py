"""`dialcheck ui`: a small web page that follows chat.turns and chat.verdicts and shows each
conversation as a chat with a verdict badge on every checked turn (aiohttp + Server-Sent Events,
plain HTML/JS, no build step). Imports only schemas/ and Kafka/web libraries."""
from .server import UIServer, create_app, serve

__all__ = ["UIServer", "create_app", "serve"]

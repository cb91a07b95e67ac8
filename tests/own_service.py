"""The test system (own_system.py) served over HTTP by tuner's FastAPI adapter: `uvicorn own_service:app`."""

from own_system import answer

from tuner.systems.adapters import http_app

app = http_app(answer)

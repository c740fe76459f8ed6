from quart import Blueprint, current_app

from skald_host.web.auth import public

bp = Blueprint("health", __name__)


@bp.get("/health")
@bp.get("/api/health")
@public
async def health() -> dict:
    """Liveness for load balancers and the latency benchmarks: no database, no auth."""
    core = current_app.config["SKALD_CORE"]
    return {"status": "stopping" if core.stopping.is_set() else "ok"}

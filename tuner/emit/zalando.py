"""``zalando/postgresql-patch.yaml``: the server settings as a merge patch for a Zalando postgres-operator
``postgresql`` resource (``acid.zalan.do/v1``, ``spec.postgresql.parameters``, every value a string), and its
rollback twin.

``kubectl patch postgresql NAME --type merge --patch-file postgresql-patch.yaml``: the operator hands the
parameters to Patroni in its pods (Spilo), so the parameters Patroni manages itself are refused here as they are
in the patroni format; tablespace and device changes cannot be expressed and are named in a comment.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tuner.emit import changes as ch
from tuner.emit import cnpg, patroni, yamldoc
from tuner.emit.twin import ApplyRollback
from tuner.report.model import Report

FILE = "zalando/postgresql-patch.yaml"
WHAT = "a Zalando postgresql resource"
API_VERSION = "acid.zalan.do/v1"
RESTART = ("needs a restart: it takes effect when PostgreSQL restarts (Patroni in the pods marks them "
           "pending_restart until then)")


def render(report: Report, *, rollback: bool = False) -> str:
    refuse = {name: f"Patroni manages it in the operator's pods: {why}" for name, why in patroni.MANAGED.items()}
    ps = ch.parameter_set(report, WHAT, refuse=refuse, restart=RESTART)
    params: dict[str, Any] = dict(ps.rollback if rollback else ps.apply)
    command = "kubectl patch postgresql NAME --type merge --patch-file postgresql-patch.yaml"
    return yamldoc.dump(cnpg.manifest(API_VERSION, "postgresql", report, params, rollback=rollback),
                        header=cnpg.header(report, ps, name="postgresql-patch.yaml", what=WHAT, command=command,
                                           rollback=rollback))


class Zalando(ApplyRollback):
    """A merge patch for a Zalando postgresql resource, and its rollback twin."""

    name: ClassVar[str] = "zalando"
    parts = ((FILE, render),)

"""split δ pot: every budget's pot for δ-only parts is split publicly into a part for approximate-RDP slacks

``budgets`` gets ``filter_slack_delta`` (δ_S, 0 ≤ δ_S ≤ δ_A = ``filter_approximate_delta``) and its rule becomes
``filter:rdp-orders+pure+split-delta-pot/v2`` (:mod:`privfit.privacy.filter`). Before this revision a fit was
admitted when D + k(1 + e^{ε_max})·A ≤ δ_A held for the committed values of THIS transcript (D the composed δ parts,
A the summed approximate-RDP slacks): a per-path check, while the filter's proof needs sup D + k(1 + e^{ε_max})
sup A ≤ δ_A over every path the adaptive analyst could have taken. From now on each admission checks (a1)
D ≤ δ_A − δ_S and (a2) k(1 + e^{ε_max})·A ≤ δ_S, which hold on every path and give the proof's condition.

New budgets get δ_S = δ_A/2 unless the owner declares ``budget.slack_delta``. An existing budget cannot be given a
split fixed before its history, since its earlier admissions were checked per path (the statement for what it
already released stays the one of the previous rule); the split is chosen so that every fit it committed stays
admitted and every admission from now on obeys (a1) and (a2):

* with committed slack (A > 0): δ_S = k(1 + e^{ε_max})·A, so the slacks fill their part and the rest of the pot
  goes to δ parts (no further approximate-RDP fit on that dataset);
* without: the default δ_S = δ_A/2, lowered to δ_A − D when the committed δ parts D need more than half the pot;
* when both cannot hold (D + k(1 + e^{ε_max})·A > δ_A: a budget already closed by revision 0005, or a rounding at
  the edge), δ_S = k(1 + e^{ε_max})·A (at most δ_A), the budget admits nothing more (its ``filter_note`` says so
  unless it has one) and the migration logs it.

D and A are the budget's cached committed values (``committed_extra_delta``, ``committed_approx_delta``: the
composition of its live reservations, which the ledger admits against). Downgrading drops the column and restores
the previous rule's name.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 10:00:00
"""

import logging
import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import sqlalchemy as sa

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RULE_V1 = "filter:rdp-orders+pure+delta-pot/v1"
RULE_V2 = "filter:rdp-orders+pure+split-delta-pot/v2"
DEFAULT_SLACK_SHARE = 0.5  # δ_S = δ_A/2 for a budget without committed δ-only parts (privfit.privacy.filter)

_log = logging.getLogger("privfit.migrations")

_budgets = sa.table(
    "budgets",
    sa.column("dataset_id", sa.String),
    sa.column("epsilon_max", sa.Float),
    sa.column("delta_max", sa.Float),
    sa.column("grid_name", sa.String),
    sa.column("committed_extra_delta", sa.Float),
    sa.column("committed_approx_delta", sa.Float),
    sa.column("filter_version", sa.String),
    sa.column("filter_orders", sa.JSON),
    sa.column("filter_order_deltas", sa.JSON),
    sa.column("filter_approximate_delta", sa.Float),
    sa.column("filter_slack_delta", sa.Float),
    sa.column("filter_note", sa.Text),
)


def upgrade() -> None:
    with op.batch_alter_table("budgets") as batch:
        batch.add_column(sa.Column("filter_slack_delta", sa.Float(), nullable=False, server_default="0"))
    _split_the_pots()


def split_for(pot: float, parts: float, slack_used: float) -> float:
    """δ_S for a budget with pot δ_A = ``pot``, committed δ parts D = ``parts`` and weighted slacks
    k(1 + e^{ε_max})·A = ``slack_used`` (module docstring); the caller checks (a1) and (a2) with it."""
    if slack_used > 0.0:
        return min(slack_used, pot)
    value = max(min(DEFAULT_SLACK_SHARE * pot, pot - parts), 0.0)
    for _ in range(64):  # δ_A − (δ_A − D) may round below D: step δ_S down until δ_D = δ_A − δ_S holds D exactly
        if parts <= pot - value or value == 0.0:
            break
        value = math.nextafter(value, 0.0)
    return value


def _split_the_pots() -> None:
    from privfit.privacy import PrivacyCost, PrivacyFilter, get_grid

    connection = op.get_bind()
    for row in connection.execute(sa.select(_budgets)).mappings().all():
        grid = get_grid(row["grid_name"])
        unsplit = PrivacyFilter(
            epsilon_max=row["epsilon_max"], delta_max=row["delta_max"], grid=grid,
            orders=tuple(row["filter_orders"]), order_deltas=tuple(row["filter_order_deltas"]),
            approximate_delta=row["filter_approximate_delta"], slack_delta=0.0, version=RULE_V2,
        )  # fmt: skip
        # D and A are all the δ pot reads of the committed cost: its curve and pure bound do not enter (a1), (a2)
        committed = PrivacyCost(
            np.zeros(len(grid)), grid, row["committed_extra_delta"], row["committed_approx_delta"], 0.0
        )
        parts, slack_used = unsplit.delta_parts(committed), unsplit.slack_used(committed)
        pot = unsplit.approximate_delta
        slack_delta = split_for(pot, parts, slack_used)
        note = row["filter_note"]
        if not replace(unsplit, slack_delta=slack_delta).delta_fits(committed):
            _log.warning(
                "revision 0009: budget of dataset %s: committed δ parts %.6g and weighted slacks %.6g do not both fit "
                "a split of its pot approximate_delta = %.6g; slack_delta = %.6g and the budget admits no more fits",
                row["dataset_id"], parts, slack_used, pot, slack_delta,
            )  # fmt: skip
            if note is None:
                note = (
                    f"moved to the split pot for δ parts (revision 0009): the committed δ parts ({parts:.3g}) and "
                    f"weighted approximate-RDP slacks ({slack_used:.3g}) do not both fit a split of "
                    f"approximate_delta = {pot:.3g}; the dataset admits no more fits"
                )
        connection.execute(
            sa.update(_budgets)
            .where(_budgets.c.dataset_id == row["dataset_id"])
            .values(filter_slack_delta=slack_delta, filter_version=RULE_V2, filter_note=note)
        )


def downgrade() -> None:
    connection = op.get_bind()
    connection.execute(sa.update(_budgets).where(_budgets.c.filter_version == RULE_V2).values(filter_version=RULE_V1))
    with op.batch_alter_table("budgets") as batch:
        batch.drop_column("filter_slack_delta")

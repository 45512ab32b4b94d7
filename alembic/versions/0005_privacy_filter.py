"""The privacy filter: every budget gets its filter (pinned order α*, δ split), pure-ε bounds are recorded

Budgets get ``filter_version``, ``filter_orders``, ``filter_order_deltas``, ``filter_approximate_delta`` (fixed from
ε_max, δ_max and the grid by :meth:`privfit.privacy.filter.PrivacyFilter.for_budget`, default δ split),
``committed_pure_epsilon`` (NULL = +∞) and ``filter_note``; ledger entries get ``pure_epsilon`` (NULL = +∞).

Existing datasets move to the filter conservatively: entries written before this revision did not record a
pure-ε bound, so a budget with live reservations gets ``committed_pure_epsilon`` = NULL (+∞: only the pinned-order
certificate can admit more), and a budget whose committed fits already exceed the filter (their measure above
ε_max, or their δ parts above the pot) admits nothing more: ``filter_note`` says so with the numbers.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_budgets = sa.table(
    "budgets",
    sa.column("dataset_id", sa.String),
    sa.column("epsilon_max", sa.Float),
    sa.column("delta_max", sa.Float),
    sa.column("grid_name", sa.String),
    sa.column("committed_rdp", sa.JSON),
    sa.column("committed_extra_delta", sa.Float),
    sa.column("committed_approx_delta", sa.Float),
    sa.column("committed_pure_epsilon", sa.Float),
    sa.column("filter_version", sa.String),
    sa.column("filter_orders", sa.JSON),
    sa.column("filter_order_deltas", sa.JSON),
    sa.column("filter_approximate_delta", sa.Float),
    sa.column("filter_note", sa.Text),
)


def upgrade() -> None:
    with op.batch_alter_table("ledger_entries") as batch:
        batch.add_column(sa.Column("pure_epsilon", sa.Float(), nullable=True))
    with op.batch_alter_table("budgets") as batch:
        batch.add_column(sa.Column("committed_pure_epsilon", sa.Float(), nullable=True))
        batch.add_column(sa.Column("filter_version", sa.String(length=64), nullable=False, server_default="unset"))
        batch.add_column(sa.Column("filter_orders", sa.JSON(), nullable=False, server_default="[]"))
        batch.add_column(sa.Column("filter_order_deltas", sa.JSON(), nullable=False, server_default="[]"))
        batch.add_column(sa.Column("filter_approximate_delta", sa.Float(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("filter_note", sa.Text(), nullable=True))
    _move_budgets_to_the_filter()


def _move_budgets_to_the_filter() -> None:
    from privfit.privacy import PrivacyCost, PrivacyFilter, curve_from_json, get_grid

    connection = op.get_bind()
    for row in connection.execute(sa.select(_budgets)).mappings().all():
        grid = get_grid(row["grid_name"])
        # the filter of this revision: no GDP certificate (revision 0014 keeps it off for every existing budget)
        privacy_filter = PrivacyFilter.for_budget(row["epsilon_max"], row["delta_max"], grid, gdp_share=0.0)
        curve = curve_from_json(row["committed_rdp"])
        empty = not curve.any() and row["committed_extra_delta"] == 0.0 and row["committed_approx_delta"] == 0.0
        pure = 0.0 if empty else None
        committed = PrivacyCost(
            curve, grid, row["committed_extra_delta"], row["committed_approx_delta"], 0.0 if empty else float("inf")
        )
        reading = privacy_filter.measure(committed)
        note = None
        if not reading.share <= 1.0:
            note = (
                f"moved to the privacy filter (revision 0005): the fits committed under the previous admission rule "
                f"use {reading.order_share:.4g}× the RDP the filter allows at its orders α = "
                f"{', '.join(f'{a:g}' for a in privacy_filter.orders)} and δ parts {reading.delta_used:.3g} of a "
                f"pot of {privacy_filter.approximate_delta:.3g} (more than the budget allows in either); the dataset "
                "admits no more fits"
            )
        connection.execute(
            sa.update(_budgets)
            .where(_budgets.c.dataset_id == row["dataset_id"])
            .values(
                committed_pure_epsilon=pure, filter_version=privacy_filter.version,
                filter_orders=list(privacy_filter.orders), filter_order_deltas=list(privacy_filter.order_deltas),
                filter_approximate_delta=privacy_filter.approximate_delta,
                filter_note=note,
            )
        )  # fmt: skip


def downgrade() -> None:
    with op.batch_alter_table("budgets") as batch:
        for column in ("filter_note", "filter_approximate_delta", "filter_order_deltas", "filter_orders",
                       "filter_version", "committed_pure_epsilon"):  # fmt: skip
            batch.drop_column(column)
    with op.batch_alter_table("ledger_entries") as batch:
        batch.drop_column("pure_epsilon")

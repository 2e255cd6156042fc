-- Stripe payments (controld/payments owns these tables): the Checkout
-- Sessions controld created, the webhook events it processed, and the
-- refunds it made. The money itself lives in ledger_entries
-- (controld/billing); these rows tie it to Stripe's objects.

-- A top-up: one Checkout Session created for a project. Paid once Stripe
-- reports it (checkout.session.completed with payment_status=paid).
CREATE TABLE stripe_checkout_sessions (
    id             text PRIMARY KEY,              -- cs_…
    project_id     text NOT NULL REFERENCES projects (id),
    user_id        text NOT NULL REFERENCES users (id),
    amount_minor   bigint NOT NULL CHECK (amount_minor > 0),
    currency       text NOT NULL,
    url            text NOT NULL,
    state          text NOT NULL CHECK (state IN ('open', 'paid')),
    payment_intent text,                          -- pi_…, known once paid
    paid_minor     bigint NOT NULL DEFAULT 0 CHECK (paid_minor >= 0),
    refunded_minor bigint NOT NULL DEFAULT 0 CHECK (refunded_minor >= 0 AND refunded_minor <= paid_minor),
    created_at     timestamptz NOT NULL,
    paid_at        timestamptz,
    paid_event_id  text,
    CHECK ((state = 'paid') = (paid_at IS NOT NULL))
);
CREATE UNIQUE INDEX stripe_checkout_sessions_pi_key ON stripe_checkout_sessions (payment_intent)
    WHERE payment_intent IS NOT NULL;
CREATE INDEX stripe_checkout_sessions_project_idx ON stripe_checkout_sessions (project_id, created_at DESC);

-- Every webhook event acted on, by Stripe's event id: a redelivery finds
-- its row and changes nothing. Inserted in the transaction of the credit.
CREATE TABLE stripe_events (
    id          text PRIMARY KEY,                 -- evt_…
    type        text NOT NULL,
    api_version text NOT NULL,
    received_at timestamptz NOT NULL,
    outcome     text NOT NULL
);

-- Refunds made through Stripe, each mirrored as a ledger debit whose
-- reference is the refund id.
CREATE TABLE stripe_refunds (
    id           text PRIMARY KEY,                -- re_…
    session_id   text NOT NULL REFERENCES stripe_checkout_sessions (id),
    amount_minor bigint NOT NULL CHECK (amount_minor > 0),
    currency     text NOT NULL,
    actor_id     text NOT NULL,
    reason       text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL
);
CREATE INDEX stripe_refunds_session_idx ON stripe_refunds (session_id);

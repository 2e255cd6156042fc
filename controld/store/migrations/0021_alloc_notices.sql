-- alloc.get shows an allocation's notices (GPU fault, idle warning,
-- budget): its alloc.notice events, read from the outbox by subject.
CREATE INDEX outbox_events_alloc_notice_idx ON outbox_events (subject, id) WHERE kind = 'alloc.notice';

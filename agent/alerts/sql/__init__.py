"""SQL back ends (SQLite and PostgreSQL) of the alert Protocols, so replicas share one pipeline.

    stores.SqlAlertStores           engine + a per-thread unit of work: `with stores.unit():` serialises
                                    pipeline work across threads and processes and commits it at once
    state.SqlAlertStateStore        AlertStateStore    (table alert_state)
    outbox.SqlOutbox                Outbox             (alert_outbox; claims leased)
    maintenance.SqlMaintenanceStore MaintenanceStore   (alert_maintenance; numbered, closed once)
    channel.SqlChannelHealth        ChannelHealthStore (alert_channel; every change one atomic statement)
    ratelimit.SqlRateLimiter        RateLimiter        (alert_robot; check-and-count under a row lock)
    records.SqlRecordSink           RecordSink         (alert_event; decisions and deliveries with reasons)

Each store's Protocol and in-memory twin live beside the concept (outbox.py, state.py, ...).
"""

"""Ingestion: the orchestrator and the stages it runs in order, one module each.

    fetch.py      targets (files, folders, URLs, stdin) → ``Source``s            (a pure stage)
    steps.py      the low steps every path shares: extract a source, chunk a source, the source hash
    items.py      what an ingest is asked (``IngestRun``), what flows through it (``Item``…), what it did
    pipeline.py   the orchestrator: lock, run ledger, producer thread, --sync; the only module that
                  knows the order of the stages
    producer.py   fetch → extract → chunk in the producer thread (large documents chunked as read)
    embedding.py  the one way a chunk gets a vector: embed cache, model loaded lazily, dual writes
    writer.py     embed and store in batches, under the run's rules (collisions, ACLs, stale documents)
    stages.py     the stages as NDJSON streams (``kbctl extract | kbctl chunk | …``), beside the orchestrator
    verify.py     the checks that end a run (``kbctl verify``)
    reembed.py    a namespace's generations: shadow build, swap, rollback (``kbctl reembed``)

Nothing is imported here: ``kbctl --help`` and a search do not load the ingest path.
"""

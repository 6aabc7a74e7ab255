"""Where the fetch stage gets its bytes: folders and files, stdin, web pages and feeds.

One module per kind of source, all stdlib except ``feedparser`` (imported lazily)::

    options.py   FetchOptions, the default extractable suffixes, media-type guessing
    globs.py     include/exclude globs and ``.kbctlignore`` rules
    folder.py    walking folders (iter_files) and reading one file into a Source
    web.py       one HTTP GET with timeouts, a size cap, retries and backoff
    feed.py      feed detection and following the links of summary-only entries
    state.py     FeedState (ETag / Last-Modified per feed URL): in memory or in a JSON file

``kbctl.fetch`` is the stage's entry point and the only module the pipeline imports.
"""

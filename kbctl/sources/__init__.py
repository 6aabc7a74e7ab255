"""Where the fetch stage gets its bytes: folders and files, stdin, web pages and feeds.

One module per kind of source, all stdlib except ``feedparser`` (imported lazily)::

    options.py   FetchOptions (and the [fetch] table), the default extractable suffixes
    globs.py     include/exclude globs and ``.kbctlignore`` rules
    folder.py    walking folders (iter_files) inside their root and reading one file into a Source
    url.py       all of HTTP: URLs and feeds into Sources; one GET with timeouts, a deadline, a
                 minimum rate, a size cap, redirects, retries and backoff
    policy.py    which addresses a URL may reach (public only unless allowed), checked on connect
    feed.py      feed detection and the links of summary-only entries
    state.py     FeedState (ETag / Last-Modified per feed URL): in memory or in a JSON file

Media types come from ``kbctl.mediatypes``, the table the extract stage uses too.

``kbctl.fetch`` is the stage's entry point and the only module the pipeline imports.
"""

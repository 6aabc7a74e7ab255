-- Record a feed's ETag and Last-Modified. Parameters: namespace id, feed URL, ETag, Last-Modified.
INSERT INTO kbctl.feed_state (namespace_id, url, etag, last_modified) VALUES (%s, %s, %s, %s)
ON CONFLICT (namespace_id, url) DO UPDATE SET etag = EXCLUDED.etag,
  last_modified = EXCLUDED.last_modified, updated_at = now()

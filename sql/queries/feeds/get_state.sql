-- A feed's ETag and Last-Modified from its last stored fetch. Parameters: namespace id, feed URL.
SELECT etag, last_modified FROM kbctl.feed_state WHERE namespace_id = %s AND url = %s

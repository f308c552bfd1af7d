"""What the tests of PostgreSQL's plans share: the server's plans logged, a table filled."""

from __future__ import annotations

AUTO_EXPLAIN = (
    "-c session_preload_libraries=auto_explain -c auto_explain.log_min_duration=0 "
    "-c auto_explain.log_level=notice"
)
"""Connection options that have the server log the plan of every statement it runs."""
FILL = (
    "INSERT INTO toolbridge_calls SELECT 'old-' || (i / 100), 'call-' || i, md5(i::text), "
    "'tool', '{\"n\": 1}'::jsonb, 'finished', 1, '{\"text\": \"ok\"}'::jsonb, NULL, NULL, "
    "1e9 + i, 1e9 + i, 1e9 + i, NULL FROM generate_series(1, %s) AS i"
)
"""A journal's finished calls of 100 per session, long ago, nobody's: one statement."""

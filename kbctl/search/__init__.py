"""Search: routing, the dense and lexical lanes, fusion, reranking and result shaping."""

from .cite import citation
from .engine import SearchOptions, run_grouped, run_search
from .filters import Filter, check_text, parse_filter, parse_filters
from .route import STRATEGIES, route

__all__ = [
    "SearchOptions",
    "run_grouped",
    "run_search",
    "citation",
    "Filter",
    "check_text",
    "parse_filter",
    "parse_filters",
    "STRATEGIES",
    "route",
]

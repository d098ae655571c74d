"""From the legs' search results to a recall's hits: fusion on an absolute scale, ties, the
date stage, and the rerank stage with its guard.
"""

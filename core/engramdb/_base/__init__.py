"""What every concern shares: ``types`` (records, hits, spaces, scopes), ``errors`` (the
error tree) and ``clock`` (time as engramdb stores it).
"""

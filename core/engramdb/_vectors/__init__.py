"""Vector maths and the in-process vector index: the float32 codec, sign-bit codes, their
index data, exact scoring, and the rules of how much work a search does.
"""

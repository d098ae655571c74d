"""The embedder protocol and the embedders the core ships: hash, static (with its WordPiece
tokenizer), the Workers AI model table, and the retry policy of provider calls.
"""

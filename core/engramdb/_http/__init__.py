"""The HTTP API's parts shared by both hosts: grants, probes, the route table and OpenAPI
document, the wire format.
"""

"""Memory operations as flows of effects, and the faces that drive them:
``Memory``/``AsyncMemory``, bound views, maintenance, policy, labels, validation, agent
tools.
"""

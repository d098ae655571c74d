"""The engramdb memory Worker: a JSON HTTP API over Workers AI (embeddings) and either one
Durable Object per tenant (``MEMORY``) or one D1 database (``DB``). See docs/workers.md.
Importing this module does no I/O and reads no randomness; everything is built on the
first request."""

from workers import DurableObject, WorkerEntrypoint

from engramdb_workers.tenant import TenantMemory
from engramdb_workers.worker import maintain, serve


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return await serve(request, self.env)

    async def scheduled(self, controller, env=None, ctx=None):
        await maintain(self.env)


class MemoryObject(DurableObject):
    """One tenant's memories, in the object's own SQLite database."""

    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        self.tenant = TenantMemory(ctx.storage, env)

    async def handle(self, request, body):
        return await self.tenant.handle(request, body)

    async def alarm(self, alarm_info=None):
        await self.tenant.maintain()

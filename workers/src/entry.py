"""The engramdb memory Worker: a JSON HTTP API over D1 (memories) and Workers AI
(embeddings). See docs/workers.md. Importing this module does no I/O and reads no
randomness; everything is built on the first request."""

from workers import WorkerEntrypoint

from engramdb_workers.worker import maintain, serve


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return await serve(request, self.env)

    async def scheduled(self, controller, env=None, ctx=None):
        await maintain(self.env)

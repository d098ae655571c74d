"""Probe 2 of ``eval.probe``: what an agent keeps about software projects, one project
name in each memory.

Ten made-up projects (a banking app, a data warehouse, a shop, a sensor network, a
hiring tool, a game, an open-source library, a field app, a booking service, a reading
app for children), twelve memories each: the stack, owners, dates, money, customers,
incidents, tests, documents. The shape differs from ``eval.probe_people``: technical
words, versions, figures and product names instead of everyday ones, and a name that is
often a possessive ("Kestrel's backend ..."). The rules are the same: every memory names
its project; its question shares no word with it but the name (stop words left out,
words stemmed as engramdb's lexical leg does); ``{subj}``, ``{obj}`` and ``{poss}`` take
the name or "it" / "its" for the pronoun questions. ``NEAR_MISS`` and ``REWORDED`` as
in ``eval.probe_people``.

Written for engramdb (Apache-2.0); the projects, people and figures are made up.
"""

from __future__ import annotations

TITLE = "projects: 10 projects x 12 memories, the project's name in every memory"

# name: (pronoun, [(key, topic, memory, question), ...])
HOLDERS: dict[str, tuple[str, list[tuple[str, str, str, str]]]] = {
    "Kestrel": ("it", [
        ("backend", "stack", "Kestrel's backend is written in Go and talks to PostgreSQL 15",
         "Which programming language and database does {subj} use?"),
        ("mobile", "stack", "Kestrel's mobile client is built with Flutter for both iOS and "
         "Android", "What framework powers {poss} phone app?"),
        ("owner", "team", "Kestrel is owned by the payments squad led by Nadia Okafor",
         "Who is in charge of {obj}?"),
        ("launch", "dates", "Kestrel must pass the security audit before launch on 1 October",
         "When is {subj} going live?"),
        ("beta", "dates", "Kestrel's beta ends on 15 September with 400 invited testers",
         "When does {poss} trial period finish?"),
        ("budget", "money", "Kestrel has a cloud budget of 12,000 dollars per month",
         "How much can {subj} spend on hosting?"),
        ("outage", "incidents", "Kestrel went down for two hours in May after an expired TLS "
         "certificate", "What caused {poss} biggest outage?"),
        ("suite", "testing", "Kestrel's test suite takes eighteen minutes on CI",
         "How long do {poss} automated checks run?"),
        ("api-docs", "docs", "Kestrel's API reference lives in a Notion workspace, not in the "
         "repo", "Where is {poss} documentation kept?"),
        ("users", "customers", "Kestrel serves about 80,000 active users in Kenya and Uganda",
         "How many people use {subj} and where?"),
        ("on-call", "operations", "Kestrel's on-call rotation changes every Tuesday at noon",
         "When does {poss} pager duty hand over?"),
        ("releases", "operations", "Kestrel ships a new version to app stores every second "
         "Thursday", "How often does {subj} release updates?"),
    ]),
    "Juniper": ("it", [
        ("nightly", "data", "Juniper loads sales data from Shopify into BigQuery every night "
         "at 2am", "When does {subj} import orders?"),
        ("dashboards", "data", "Juniper's dashboards are built in Looker and refreshed hourly",
         "Which reporting tool shows {poss} charts?"),
        ("contractor", "team", "Juniper is maintained by a single contractor, Felix, two days "
         "a week", "Who looks after {obj}?"),
        ("cost", "money", "Juniper costs roughly 900 euros a month in query fees",
         "What is {poss} monthly bill?"),
        ("gdpr", "compliance", "Juniper stores customer emails, so it falls under GDPR",
         "Does {subj} hold personal information?"),
        ("retention", "compliance", "Juniper keeps raw files for 13 months before deleting "
         "them", "How long is {poss} data retained?"),
        ("breakage", "incidents", "Juniper broke in March when a column was renamed upstream",
         "What caused {poss} last failure?"),
        ("dbt", "testing", "Juniper's SQL models are tested with dbt on every pull request",
         "How are {poss} transformations validated?"),
        ("snowflake", "plans", "Juniper will migrate to Snowflake in the first quarter of next "
         "year", "Which warehouse is {subj} moving to?"),
        ("cfo", "customers", "Juniper's finance dashboards are read by the CFO every Monday",
         "Who reviews {poss} money reports?"),
        ("airflow", "stack", "Juniper runs on Airflow with 45 scheduled DAGs",
         "What orchestrator triggers {poss} jobs?"),
        ("gitlab", "stack", "Juniper's code lives in a private GitLab repository",
         "Where is {poss} source hosted?"),
    ]),
    "Basalt": ("it", [
        ("ceramics", "product", "Basalt is a Django storefront selling handmade ceramics",
         "What products does {subj} offer?"),
        ("checkout", "payments", "Basalt's checkout uses Stripe and accepts PayPal since April",
         "Which payment providers does {subj} support?"),
        ("markets", "customers", "Basalt gets most orders from Germany and the Netherlands",
         "Where are {poss} buyers located?"),
        ("black-friday", "dates", "Basalt's Black Friday sale starts on 27 November at "
         "midnight", "When does {poss} big discount event begin?"),
        ("shipping", "payments", "Basalt ships parcels with DHL and delivery is free above 60 "
         "euros", "Which courier does {subj} use for packages?"),
        ("photos", "stack", "Basalt's item photos are stored on Cloudinary",
         "Where are {poss} images hosted?"),
        ("founders", "team", "Basalt was founded in 2019 by two sisters from Porto",
         "Who started {obj} and when?"),
        ("returns", "customers", "Basalt's returns rate is about 4 percent, mostly broken mugs",
         "How often do {poss} customers send goods back?"),
        ("downtime", "incidents", "Basalt's site went offline for a day during a hosting "
         "migration", "When was {subj} unreachable?"),
        ("newsletter", "marketing", "Basalt has 3,200 newsletter subscribers on Mailchimp",
         "How big is {poss} mailing list?"),
        ("page-speed", "incidents", "Basalt's page speed score dropped to 58 after the "
         "redesign", "How fast does {subj} load now?"),
        ("server", "stack", "Basalt runs on a single Hetzner server in Falkenstein",
         "Where is {subj} deployed?"),
    ]),
    "Nimbus": ("it", [
        ("stations", "scale", "Nimbus collects readings from 1,400 weather stations across "
         "Scotland", "How many sensors feed {obj}?"),
        ("influx", "stack", "Nimbus stores time series in InfluxDB with one-minute resolution",
         "Which database holds {poss} measurements?"),
        ("floods", "product", "Nimbus sends flood alerts by SMS to farmers",
         "How does {subj} warn people about rising rivers?"),
        ("grant", "money", "Nimbus is funded by a government grant that expires in 2027",
         "When does {poss} money run out?"),
        ("firmware", "stack", "Nimbus's firmware for the stations is written in Rust",
         "What language is {poss} device code in?"),
        ("disk", "incidents", "Nimbus lost three days of data when a disk failed in January",
         "Has {subj} ever had an outage that destroyed records?"),
        ("map", "customers", "Nimbus's public map gets 20,000 visitors on stormy days",
         "How popular is {poss} website during bad weather?"),
        ("team", "team", "Nimbus is developed by a team of three at the University of Aberdeen",
         "Who builds {obj}?"),
        ("lorawan", "stack", "Nimbus's stations report every five minutes over LoRaWAN",
         "How often do {poss} devices transmit?"),
        ("paging", "operations", "Nimbus pages the on-duty engineer if 10 percent of stations "
         "go silent", "What triggers an alert for {poss} maintainers?"),
        ("licence", "legal", "Nimbus's data is released openly under a CC BY licence",
         "Can anyone reuse {poss} measurements?"),
        ("air-quality", "plans", "Nimbus will add air quality sensors next spring",
         "What new capability is planned for {obj}?"),
    ]),
    "Orchid": ("it", [
        ("interviews", "product", "Orchid helps small companies schedule job interviews",
         "What problem does {subj} solve?"),
        ("pricing", "money", "Orchid charges 29 dollars per recruiter per month",
         "How much is {poss} subscription?"),
        ("calendars", "stack", "Orchid integrates with Google Calendar and Outlook",
         "Which scheduling tools does {subj} connect to?"),
        ("frontend", "stack", "Orchid's React frontend is hosted on Vercel",
         "Where does {poss} web interface run?"),
        ("hospital", "customers", "Orchid signed its largest customer, a hospital chain, in "
         "July", "What was {poss} biggest deal?"),
        ("churn", "customers", "Orchid's churn went up to 6 percent after the price increase",
         "How many clients is {subj} losing?"),
        ("founders", "team", "Orchid's founders are Amir and Beth, both former recruiters",
         "Who created {obj}?"),
        ("rating", "customers", "Orchid's mobile app has a 4.6 star rating in the App Store",
         "How do users review {poss} phone version?"),
        ("soc2", "compliance", "Orchid is preparing for SOC 2 certification by December",
         "What compliance audit is {subj} working toward?"),
        ("support", "operations", "Orchid's support inbox is answered within four hours on "
         "weekdays", "How quickly does {subj} reply to help requests?"),
        ("cvs", "compliance", "Orchid stores candidate CVs in an encrypted S3 bucket",
         "Where are {poss} applicant resumes kept?"),
        ("seed", "money", "Orchid raised 2 million dollars of seed funding last year",
         "How much investment has {subj} secured?"),
    ]),
    "Tundra": ("it", [
        ("genre", "product", "Tundra is a survival game set in the Siberian wilderness",
         "What genre is {subj}?"),
        ("unreal", "stack", "Tundra runs on Unreal Engine 5",
         "What technology is {subj} built with?"),
        ("early-access", "dates", "Tundra's early access launch on Steam is planned for 14 "
         "February", "When can players first buy {obj}?"),
        ("budget", "money", "Tundra's development budget is 1.5 million euros",
         "How much did {subj} cost to make?"),
        ("studios", "team", "Tundra's art team works from Kraków and the writers from "
         "Montreal", "Where are {poss} developers based?"),
        ("amd", "incidents", "Tundra crashes on AMD graphics cards with old drivers",
         "What hardware bug affects {obj}?"),
        ("trailer", "marketing", "Tundra's trailer got 300,000 views in its first week",
         "How did {poss} promotional video perform?"),
        ("co-op", "product", "Tundra supports four-player online co-op",
         "Can friends play {obj} together?"),
        ("publisher", "team", "Tundra's publisher is a Swedish company called Frostgrain "
         "Interactive", "Who distributes {obj}?"),
        ("playtests", "testing", "Tundra's playtests happen every other Saturday with 50 "
         "volunteers", "When is {subj} tried out by the public?"),
        ("soundtrack", "product", "Tundra's soundtrack is composed by an Icelandic cellist",
         "Who wrote the music for {obj}?"),
        ("price", "money", "Tundra's price at launch will be 24.99 dollars",
         "How much will {subj} sell for?"),
    ]),
    "Lantern": ("it", [
        ("purpose", "product", "Lantern is an open-source Python library for extracting "
         "tables from PDFs", "What does {subj} do with documents?"),
        ("mit", "legal", "Lantern is released under the MIT licence",
         "What terms can {subj} be reused under?"),
        ("meetings", "team", "Lantern's maintainers meet on a video call every first Wednesday",
         "When do {poss} core developers get together?"),
        ("stars", "community", "Lantern has 4,100 stars on GitHub and 60 contributors",
         "How popular is {subj}?"),
        ("python38", "releases", "Lantern version 3.0 dropped support for Python 3.8",
         "Which old interpreters did {subj} abandon?"),
        ("sphinx", "docs", "Lantern's docs are built with Sphinx and hosted on Read the Docs",
         "Where can users find {poss} manual?"),
        ("ghostscript", "stack", "Lantern needs Ghostscript installed to handle scanned files",
         "What system dependency does {subj} require?"),
        ("ocr", "performance", "Lantern's slowest step is OCR, which takes two seconds a page",
         "What is the performance bottleneck in {obj}?"),
        ("grant", "money", "Lantern is funded by a 15,000 dollar grant from a foundation",
         "Who pays for {obj}?"),
        ("handwriting", "community", "Lantern's most requested feature is support for "
         "handwritten forms", "What do {poss} users want next?"),
        ("coverage", "testing", "Lantern's test coverage is 87 percent",
         "How thoroughly is {subj} checked?"),
        ("next-release", "releases", "Lantern's upcoming release is due before PyCon in May",
         "When will {poss} new version come out?"),
    ]),
    "Quarry": ("it", [
        ("rentals", "product", "Quarry tracks equipment rentals for 30 building sites",
         "What does {subj} keep an inventory of?"),
        ("foremen", "customers", "Quarry's users are mostly site foremen using tablets",
         "Who relies on {obj} day to day?"),
        ("offline", "product", "Quarry works offline and syncs when a connection returns",
         "What happens to {obj} without internet?"),
        ("typescript", "stack", "Quarry was rewritten from PHP to TypeScript in 2023",
         "What language was {subj} ported to?"),
        ("sqlite", "stack", "Quarry's database is SQLite on the device and Postgres on the "
         "server", "Where does {subj} store its records?"),
        ("road-builder", "customers", "Quarry's biggest client is a road builder with 900 "
         "staff", "Who is {poss} largest customer?"),
        ("deliveries", "product", "Quarry logs every delivery with a photo and GPS position",
         "How does {subj} prove goods arrived?"),
        ("licence", "money", "Quarry's annual licence costs 40,000 pounds per company",
         "What does {subj} charge a year?"),
        ("renewal", "dates", "Quarry's contract with the road builder renews on 1 April",
         "When is {poss} main agreement up for extension?"),
        ("ipads", "incidents", "Quarry crashed on older iPads until the 2.4 update",
         "Which devices did {subj} fail on?"),
        ("product-owner", "team", "Quarry's product owner is Grace Mensah from operations",
         "Who decides what goes into {obj}?"),
        ("checklist", "product", "Quarry sends a safety checklist to every crew at 7am",
         "What does {subj} push to workers each morning?"),
    ]),
    "Marlin": ("it", [
        ("bookings", "product", "Marlin takes table bookings for 120 restaurants in Lisbon",
         "What service does {subj} provide?"),
        ("fee", "money", "Marlin charges restaurants one euro per seated guest",
         "How does {subj} make money?"),
        ("languages", "product", "Marlin's app is available in Portuguese, English and Spanish",
         "Which languages does {subj} speak?"),
        ("reminders", "product", "Marlin sends a reminder text two hours before each "
         "reservation", "How does {subj} notify diners ahead of a meal?"),
        ("no-shows", "customers", "Marlin's no-show rate fell from 18 to 7 percent",
         "Has {subj} reduced missed bookings?"),
        ("rails", "stack", "Marlin's backend is a Ruby on Rails monolith",
         "What framework does {subj} use on the server?"),
        ("peak", "operations", "Marlin's peak traffic is Friday evening around 7pm",
         "When is {subj} busiest?"),
        ("acquisition", "company", "Marlin is being acquired by a larger booking platform "
         "from Madrid", "Who is buying {obj}?"),
        ("support", "team", "Marlin's support team is two people in Porto",
         "Who answers {poss} customer questions?"),
        ("export", "product", "Marlin's restaurant partners can export guest lists as CSV",
         "Can venues download diner data from {obj}?"),
        ("aws", "money", "Marlin's server bill doubled after moving to AWS",
         "Why did {poss} hosting costs rise?"),
        ("launched", "company", "Marlin launched in March 2021 during the pandemic",
         "When did {subj} start operating?"),
    ]),
    "Pebble": ("it", [
        ("phonics", "product", "Pebble teaches children aged four to seven to read with "
         "phonics games", "Which youngsters is {subj} designed for?"),
        ("price", "money", "Pebble costs 4.99 a month after a seven-day free trial",
         "How much is {poss} subscription?"),
        ("narration", "team", "Pebble's stories are narrated by professional voice actors",
         "Who records {poss} audio?"),
        ("privacy", "compliance", "Pebble collects no personal data to comply with "
         "children's privacy law", "What information does {subj} gather about kids?"),
        ("unity", "stack", "Pebble was built with Unity and runs on iPad and Android tablets",
         "What devices does {subj} work on?"),
        ("illustrator", "team", "Pebble's illustrator, Hana, draws every character by hand",
         "Who creates {poss} artwork?"),
        ("schools", "customers", "Pebble is used in 350 primary schools across Ireland",
         "How many classrooms rely on {obj}?"),
        ("dragon", "product", "Pebble's top story is about a dragon who is afraid of the dark",
         "What is {poss} most popular tale?"),
        ("new-stories", "product", "Pebble releases five new stories every month",
         "How often does {subj} add fresh content?"),
        ("office", "team", "Pebble's team is six people working from a shared office in Cork",
         "Where is {poss} staff located?"),
        ("award", "company", "Pebble won a national education award in 2024",
         "What prize has {subj} received?"),
        ("dashboard", "product", "Pebble's parents' dashboard shows minutes read per day",
         "How can mums and dads follow progress in {obj}?"),
    ]),
}  # fmt: skip

# Two memories of one project on close topics, as "Name/key".
NEAR_MISS: list[tuple[str, str]] = [
    ("Kestrel/backend", "Kestrel/mobile"),
    ("Kestrel/launch", "Kestrel/beta"),
    ("Juniper/dashboards", "Juniper/cfo"),
    ("Juniper/gdpr", "Juniper/retention"),
    ("Basalt/checkout", "Basalt/shipping"),
    ("Basalt/downtime", "Basalt/server"),
    ("Nimbus/influx", "Nimbus/firmware"),
    ("Nimbus/floods", "Nimbus/paging"),
    ("Orchid/pricing", "Orchid/seed"),
    ("Orchid/hospital", "Orchid/churn"),
    ("Tundra/early-access", "Tundra/playtests"),
    ("Tundra/budget", "Tundra/price"),
    ("Lantern/python38", "Lantern/next-release"),
    ("Quarry/road-builder", "Quarry/renewal"),
    ("Quarry/typescript", "Quarry/sqlite"),
    ("Marlin/fee", "Marlin/aws"),
    ("Marlin/acquisition", "Marlin/launched"),
    ("Pebble/dragon", "Pebble/new-stories"),
    ("Pebble/narration", "Pebble/illustrator"),
]

# A memory restated in other words, as an agent might store it again.
REWORDED: dict[str, str] = {
    "Kestrel/backend": "Kestrel's server side uses Golang with a Postgres database",
    "Kestrel/outage": "Kestrel had an outage this spring because an SSL cert lapsed",
    "Kestrel/releases": "Kestrel publishes an update to the marketplaces fortnightly",
    "Juniper/nightly": "Juniper imports shop orders into Google's warehouse overnight",
    "Juniper/snowflake": "Juniper is switching warehouse vendors by the end of Q1",
    "Juniper/contractor": "Juniper's only engineer is a part-time freelancer",
    "Basalt/checkout": "Basalt takes card payments plus a popular digital wallet as of this spring",
    "Basalt/founders": "Basalt's creators are a pair of Portuguese siblings who started it five "
    "years ago",
    "Basalt/server": "Basalt is hosted by a lone German machine",
    "Nimbus/floods": "Nimbus texts agricultural workers when rivers are about to overflow",
    "Nimbus/grant": "Nimbus relies on state financing ending in the late 2020s",
    "Nimbus/team": "Nimbus is the work of a trio of academics in north-east Scotland",
    "Orchid/pricing": "Orchid's price is about thirty bucks for each hiring manager monthly",
    "Orchid/founders": "Orchid was started by two ex-headhunters",
    "Orchid/cvs": "Orchid keeps applicants' resumes in protected Amazon storage",
    "Tundra/unreal": "Tundra is built with Epic's game technology",
    "Tundra/amd": "Tundra fails on some Radeon GPUs unless their software is current",
    "Tundra/soundtrack": "Tundra's music is written by a string player from Reykjavik",
    "Lantern/mit": "Lantern's code can be reused freely under a permissive grant",
    "Lantern/python38": "Lantern's latest major release no longer runs on older interpreters",
    "Lantern/ghostscript": "Lantern depends on a PostScript interpreter for processing images "
    "of paper",
    "Quarry/offline": "Quarry keeps functioning without internet and catches up later",
    "Quarry/typescript": "Quarry's codebase was ported to a typed JavaScript dialect",
    "Quarry/licence": "Quarry charges each customer forty thousand sterling yearly",
    "Marlin/fee": "Marlin earns a small fee for every diner who shows up",
    "Marlin/acquisition": "Marlin is selling itself to a bigger Spanish reservations company",
    "Marlin/aws": "Marlin's hosting costs went up twofold once it switched to Amazon's cloud",
    "Pebble/phonics": "Pebble helps young kids learn letters and sounds through play",
    "Pebble/privacy": "Pebble gathers nothing identifying about its little users, per regulations",
    "Pebble/award": "Pebble received a country-wide prize for schooling",
}

package demo

import "math/rand/v2"

// persona is the subject matter of one kind of demo agent: what its users
// ask, what it searches for, which tools it calls and what it answers. The
// banks are read-only after package initialisation (they are never written),
// so sharing them between scripts needs no locking.
type persona struct {
	name      string // Options.Persona value
	agent     string // speaker name on assistant messages
	model     string
	prompts   []string // first user message of a thread
	followups []string // user messages of later runs
	queries   []string // web_search queries
	hits      []hit    // web_search results
	tools     []tool
	thoughts  []string // reasoning sentences
	answers   []string // answer sentences
	bullets   []string // answer list items
	planSteps []string
	listTitle string
	checklist []string
	subagents []subagent
	// widget is an activity type no dashboard knows, emitted now and then so
	// that generic rendering of unknown activities is exercised.
	widget        string
	widgetContent func(r *rand.Rand) map[string]any
}

type hit struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet"`
}

type tool struct {
	name   string
	args   func(r *rand.Rand) map[string]any
	result func(r *rand.Rand) map[string]any
}

type subagent struct {
	name, description string
	lines             []string
}

// personas are indexed by Config tenant position (tenant i plays personas[i%len]).
var personas = []*persona{travel, research, devops}

func personaByName(name string) *persona {
	for _, p := range personas {
		if p.name == name {
			return p
		}
	}
	return nil
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

var travel = &persona{
	name:  "travel",
	agent: "Atlas",
	model: "demo-large-2",
	prompts: []string{
		"Plan a 3-day trip to Lisbon in May for two people, mid-range budget.",
		"I have a 9-hour layover in Tokyo. What can I realistically do?",
		"Find me a quiet beach town in Portugal that isn't overrun by tourists.",
		"We're going to Kyōto with a toddler. Which temples are stroller-friendly?",
		"What's the cheapest way to get from Munich to Salzburg on a Sunday?",
		"Is it worth renting a car in Iceland for 5 days in October?",
	},
	followups: []string{
		"Can you swap day 2 for something more relaxed?",
		"What about restaurants? We're vegetarian.",
		"How much should we budget per day, roughly, in €?",
		"Is there anything we should book in advance?",
		"Can you put this in a checklist I can share?",
		"What if it rains? 🌧️",
	},
	queries: []string{
		"Lisbon 3 day itinerary May", "Tokyo layover Narita city tour 9 hours",
		"quiet beach towns Portugal off season", "Kyoto temples stroller accessible",
		"Munich to Salzburg train Sunday fares", "Iceland ring road October driving conditions",
		"best pastéis de nata Lisbon", "vegetarian restaurants Alfama",
	},
	hits: []hit{
		{"Lisbon in 3 days: the perfect itinerary", "https://travel.example.com/lisbon-3-days", "Start in Alfama, take tram 28 early to beat the crowds, and end at Miradouro da Senhora do Monte for sunset."},
		{"Tram 28: tips & timetable", "https://transit.example.org/lisbon/tram-28", "Board at Martim Moniz before 9 am; pickpockets are common at peak hours."},
		{"Belém without the queues", "https://blog.example.net/belem", "Buy the Jerónimos ticket online; the pastry shop line moves fast after 3 pm."},
		{"Sintra day trip guide", "https://travel.example.com/sintra", "Trains leave Rossio every 20 minutes; Pena Palace needs a timed entry."},
		{"Narita layover: is the city worth it?", "https://flights.example.com/narita-layover", "With 9 hours you have about 4 hours in town after transit and security."},
		{"Comporta: Portugal's calm coast", "https://coast.example.org/comporta", "Rice fields, stilt-house piers and wide beaches an hour south of Lisbon."},
		{"Bayern-Ticket explained", "https://rail.example.de/bayern-ticket", "A day ticket valid to Salzburg Hbf; cheaper than point-to-point for two."},
		{"Iceland in October — what to expect", "https://north.example.is/october", "Expect 9 hours of daylight, possible snow in the north, and fewer crowds."},
	},
	tools: []tool{
		{"get_weather", func(r *rand.Rand) map[string]any {
			return map[string]any{"city": pick(r, []string{"Lisbon", "Tokyo", "Kyōto", "Salzburg", "Reykjavík"}), "days": 1 + r.IntN(5), "units": "metric"}
		}, func(r *rand.Rand) map[string]any {
			return map[string]any{"forecast": pick(r, []string{"sunny", "partly cloudy", "light rain", "windy"}), "highC": 12 + r.IntN(16), "lowC": 4 + r.IntN(10), "precipitationMm": r.IntN(8)}
		}},
		{"search_hotels", func(r *rand.Rand) map[string]any {
			return map[string]any{"city": pick(r, []string{"Lisbon", "Porto", "Comporta"}), "checkIn": "2027-05-1" + string(rune('0'+r.IntN(9))), "nights": 2 + r.IntN(3), "guests": 2, "maxPricePerNight": 120 + 10*r.IntN(10)}
		}, func(r *rand.Rand) map[string]any {
			return map[string]any{"hotels": []map[string]any{
				{"name": "Casa do Largo", "pricePerNight": 118 + r.IntN(30), "rating": 4.6},
				{"name": "Hotel Miradouro", "pricePerNight": 135 + r.IntN(30), "rating": 4.4},
			}, "currency": "EUR"}
		}},
		{"convert_currency", func(r *rand.Rand) map[string]any {
			return map[string]any{"amount": 50 * (1 + r.IntN(20)), "from": "EUR", "to": pick(r, []string{"USD", "JPY", "GBP", "ISK"})}
		}, func(r *rand.Rand) map[string]any {
			return map[string]any{"rate": 1.08, "converted": 54 * (1 + r.IntN(20)), "asOf": "2027-05-01"}
		}},
	},
	thoughts: []string{
		"The user wants a realistic pace, so I should not pack more than three sights per day.",
		"May is shoulder season in Lisbon; crowds are moderate and prices have not peaked yet.",
		"Two people, mid-range budget: roughly €120–160 per night for a central hotel.",
		"I should check the weather before recommending the beach day.",
		"Trams are picturesque but slow; the metro is better for getting across town.",
		"Sintra deserves a full day, so it can't share a day with Belém.",
		"I'll group sights by neighbourhood to minimise transit time.",
		"The layover constraint dominates: transit plus immigration eats about three hours.",
		"Let me verify the opening hours rather than assume them.",
	},
	answers: []string{
		"Here's a plan that keeps each day walkable and leaves room for long lunches.",
		"Day 1 is for Alfama and Baixa: get lost in the alleys, then ride tram 28 before 9 am.",
		"Day 2 goes west to Belém — the Jerónimos Monastery, the tower, and the famous pastéis.",
		"Day 3 is a day trip to Sintra; book Pena Palace for the first slot of the day.",
		"Evenings are best spent at a miradouro with a glass of vinho verde.",
		"The weather in May is mild, around 22 °C, so pack layers and comfortable shoes.",
		"If you only book one thing ahead, make it the Sintra palace tickets.",
		"Budget about €90 per person per day for food, transit and entry fees.",
		"For a quieter alternative, swap Sintra for a lazy beach day in Cascais.",
		"Let me know if you'd like restaurant picks — I can filter for vegetarian options.",
	},
	bullets: []string{
		"**Tram 28** at Martim Moniz, before 9 am",
		"**Jerónimos Monastery** — buy tickets online",
		"**Pastéis de Belém**, expect a short queue",
		"**Pena Palace**, timed entry, first slot",
		"**LX Factory** for a relaxed evening",
		"**Time Out Market** if you can't decide where to eat",
		"A **Viva Viagem** card for metro and trams",
	},
	planSteps: []string{"Understand the trip constraints", "Check the weather", "Shortlist neighbourhoods", "Draft the day-by-day plan", "Estimate the budget", "Collect booking links"},
	listTitle: "Before you go",
	checklist: []string{"Passports valid for 6+ months", "Book Pena Palace tickets", "Reserve hotel in Alfama", "Buy Viva Viagem cards", "Download offline maps", "Travel insurance"},
	subagents: []subagent{
		{"hotel-scout", "Finds and compares hotels within budget", []string{"Comparing 14 hotels in Alfama and Baixa within budget.", "Casa do Largo has the best rating-to-price ratio at €118 per night.", "Two options include breakfast; one has a terrace with a river view."}},
		{"food-guide", "Suggests restaurants for the itinerary", []string{"Filtering restaurants near each day's route.", "Three vegetarian-friendly places in Alfama have good reviews.", "Reservations are recommended on Friday and Saturday evenings."}},
	},
	widget: "map_route",
	widgetContent: func(r *rand.Rand) map[string]any {
		return map[string]any{"from": "Rossio", "to": "Sintra", "mode": "train", "minutes": 40 + r.IntN(10), "stops": []string{"Rossio", "Queluz-Belas", "Sintra"}}
	},
}

var research = &persona{
	name:  "research",
	agent: "Quill",
	model: "demo-large-2",
	prompts: []string{
		"Summarise the market for home battery storage in Europe.",
		"Compare the three biggest vector databases by pricing and features.",
		"What are the main risks in our Q3 supplier list?",
		"Give me a one-page brief on heat pump adoption in Germany.",
		"How do competitors price their API tiers?",
	},
	followups: []string{
		"Can you add sources for each claim?",
		"Which of these numbers is the least reliable?",
		"Turn that into three slides.",
		"What changed compared to last year?",
		"Drill into the top two risks.",
	},
	queries: []string{
		"home battery storage Europe market size 2026", "vector database pricing comparison",
		"heat pump installations Germany 2026", "API pricing tiers developer platforms",
		"supplier concentration risk semiconductors", "residential storage subsidies EU",
	},
	hits: []hit{
		{"European residential storage outlook", "https://energy.example.org/storage-outlook", "Installed capacity grew 38% year over year, led by Germany and Italy."},
		{"Battery prices fall again", "https://news.example.com/battery-prices", "Pack prices dropped below $110/kWh, improving payback for households."},
		{"Heat pumps: installation statistics", "https://stats.example.de/waermepumpen", "Installations slowed after subsidy changes, then recovered in the second half."},
		{"Vector DB benchmark & pricing", "https://db.example.dev/vector-compare", "Managed offerings differ mostly in storage pricing and read-unit costs."},
		{"Supplier risk heatmap", "https://risk.example.com/heatmap", "Single-source components account for most disruption days."},
		{"API pricing teardown", "https://saas.example.io/api-pricing", "Most platforms use a free tier, a usage tier and an enterprise tier with committed spend."},
	},
	tools: []tool{
		{"query_warehouse", func(r *rand.Rand) map[string]any {
			return map[string]any{"sql": pick(r, []string{"SELECT supplier, risk_score FROM suppliers ORDER BY risk_score DESC LIMIT 10", "SELECT region, SUM(mwh) FROM installs GROUP BY region", "SELECT tier, AVG(price) FROM competitors GROUP BY tier"}), "timeoutSec": 30}
		}, func(r *rand.Rand) map[string]any {
			return map[string]any{"rows": 3 + r.IntN(12), "elapsedMs": 80 + r.IntN(900), "truncated": false}
		}},
		{"fetch_document", func(r *rand.Rand) map[string]any {
			return map[string]any{"url": pick(r, []string{"https://energy.example.org/storage-outlook", "https://risk.example.com/heatmap"}), "maxChars": 8000}
		}, func(r *rand.Rand) map[string]any {
			return map[string]any{"title": "Outlook 2026", "chars": 6000 + r.IntN(2000), "language": "en"}
		}},
	},
	thoughts: []string{
		"The question mixes market size and growth; I should report both separately.",
		"Sources disagree on the 2025 baseline, so I'll give a range rather than a point.",
		"I need at least two independent sources per number.",
		"Subsidy changes explain the dip; it is not a demand problem.",
		"Let me pull the internal numbers before relying on press coverage.",
		"The user asked for a brief, so five bullets at most.",
		"Pricing pages change often; I should note the date I read them.",
	},
	answers: []string{
		"Short version: the market is growing fast, but unevenly across countries.",
		"Germany and Italy account for roughly half of new installations.",
		"Falling pack prices have shortened payback periods to about eight years.",
		"The main uncertainty is subsidy policy, which changed twice in eighteen months.",
		"Our internal data agrees with the public figures within about 5%.",
		"I'd treat the 2027 forecasts as optimistic; they assume stable incentives.",
		"Sources are listed under each claim so you can check them.",
		"Happy to turn this into slides or a memo.",
	},
	bullets: []string{
		"Market grew **38%** year over year",
		"Pack prices under **$110/kWh**",
		"**Germany + Italy** ≈ half of installs",
		"Subsidy risk is the **#1 uncertainty**",
		"Payback ≈ **8 years** for a typical household",
		"Two suppliers are **single-source** for critical parts",
	},
	planSteps: []string{"Clarify the scope", "Search public sources", "Query internal data", "Cross-check numbers", "Write the brief"},
	listTitle: "Brief checklist",
	checklist: []string{"Market size with range", "Growth rate", "Top 3 countries", "Key risks", "Sources cited", "Date of data"},
	subagents: []subagent{
		{"fact-checker", "Verifies every number against two sources", []string{"Checking 6 figures against independent sources.", "The 38% growth figure is confirmed by two reports.", "One forecast could only be traced to a press release; flagged as weak."}},
		{"data-analyst", "Runs queries on the internal warehouse", []string{"Running the installs query by region.", "Internal totals match the public data within 4.2%.", "Italy's numbers are incomplete for the last month."}},
	},
	widget: "chart",
	widgetContent: func(r *rand.Rand) map[string]any {
		return map[string]any{"kind": "bar", "title": "Installs by country (GWh)", "series": []map[string]any{{"label": "DE", "value": 5 + r.IntN(3)}, {"label": "IT", "value": 3 + r.IntN(2)}, {"label": "UK", "value": 1 + r.IntN(2)}}}
	},
}

var devops = &persona{
	name:  "devops",
	agent: "Forge",
	model: "demo-code-1",
	prompts: []string{
		"Our checkout service p99 latency doubled after the last deploy. Why?",
		"The nightly build fails with `exit status 137`. What's going on?",
		"Write a migration that adds an index on orders(created_at) without locking.",
		"Why does `<script>` show up escaped in our emails now?",
		"Pods keep restarting with OOMKilled in staging.",
	},
	followups: []string{
		"Can you roll back just that change?",
		"Add a test for it.",
		"What alert would have caught this earlier?",
		"Is it safe to run during business hours?",
		"Open a PR with the fix.",
	},
	queries: []string{
		"exit status 137 docker build OOM", "postgres create index concurrently lock",
		"kubernetes OOMKilled memory limit JVM", "go http client connection reuse latency",
		"html/template escaping email regression",
	},
	hits: []hit{
		{"Exit code 137 means SIGKILL", "https://docs.example.dev/exit-137", "The kernel OOM killer usually sent it; check the container's memory limit."},
		{"CREATE INDEX CONCURRENTLY", "https://db.example.org/concurrent-index", "Builds the index without blocking writes; cannot run inside a transaction."},
		{"Why your pods are OOMKilled", "https://k8s.example.io/oomkilled", "Heap plus off-heap memory must fit the limit, not just -Xmx."},
		{"Connection reuse in Go's HTTP client", "https://go.example.dev/http-reuse", "Not draining response bodies prevents keep-alive reuse and adds a TLS handshake per request."},
	},
	tools: []tool{
		{"run_query", func(r *rand.Rand) map[string]any {
			return map[string]any{"datasource": "prometheus", "expr": pick(r, []string{`histogram_quantile(0.99, sum(rate(http_request_duration_seconds_bucket{service="checkout"}[5m])) by (le))`, `sum(container_memory_working_set_bytes{namespace="staging"}) by (pod)`}), "range": "6h"}
		}, func(r *rand.Rand) map[string]any {
			return map[string]any{"series": 1 + r.IntN(4), "max": 0.8 + float64(r.IntN(20))/10, "unit": "s"}
		}},
		{"read_file", func(r *rand.Rand) map[string]any {
			return map[string]any{"path": pick(r, []string{"services/checkout/client.go", "deploy/staging/values.yaml", "build/Dockerfile"}), "startLine": 1 + r.IntN(40), "endLine": 80 + r.IntN(40)}
		}, func(r *rand.Rand) map[string]any {
			return map[string]any{"lines": 60 + r.IntN(40), "truncated": false, "sha": "3f9a2c1"}
		}},
		{"git_log", func(r *rand.Rand) map[string]any {
			return map[string]any{"path": "services/checkout", "since": "3 days ago", "limit": 5 + r.IntN(10)}
		}, func(r *rand.Rand) map[string]any {
			return map[string]any{"commits": 3 + r.IntN(6), "authors": 2, "suspect": "a41c9e0 bump http client timeout handling"}
		}},
	},
	thoughts: []string{
		"The latency change lines up with the deploy, so I'll start from the diff.",
		"Exit 137 is almost always the OOM killer, not the build itself.",
		"If response bodies aren't drained, connections aren't reused.",
		"I should confirm with metrics before blaming the code change.",
		"The index must be built concurrently or it will block writes on orders.",
		"Memory limit is 512Mi but the heap alone is configured for 480Mi.",
		"Escaping `<script>` is the correct behaviour; the question is why it changed.",
	},
	answers: []string{
		"Found it: the new client code returns early without draining the response body.",
		"That disables keep-alive reuse, so every request pays for a fresh TLS handshake.",
		"The p99 jump from 180 ms to 390 ms matches one extra round trip.",
		"The fix is a two-line change: drain and close the body on every path.",
		"For the build, raise the runner's memory limit or cap the linker's parallelism.",
		"Use `CREATE INDEX CONCURRENTLY` outside a transaction; it won't block writes.",
		"I'd add an alert on connection churn so this shows up before latency does.",
		"Text like <b>this</b> is shown literally: the template escapes it, as it should.",
	},
	bullets: []string{
		"Drain `resp.Body` before `Close()`",
		"Set `MaxIdleConnsPerHost` to 32",
		"Alert on `tls_handshakes_total` rate",
		"Limit the build to `-p 2`",
		"Run the migration **off-peak** anyway",
		"Add a regression test for keep-alive reuse",
	},
	planSteps: []string{"Reproduce the symptom", "Correlate with deploys", "Read the suspect diff", "Confirm with metrics", "Propose a fix", "Add a regression test"},
	listTitle: "Incident follow-up",
	checklist: []string{"Metrics confirm regression", "Suspect commit identified", "Fix written", "Test added", "Canary deployed", "Alert configured"},
	subagents: []subagent{
		{"log-miner", "Searches logs around the incident window", []string{"Scanning 1.2M log lines in the incident window.", "TLS handshake count per minute rose 9× after 14:02 UTC.", "No errors, only slower successful requests."}},
		{"test-writer", "Writes a regression test for the fix", []string{"Writing a test that counts new connections per 100 requests.", "The test fails on the old code: 100 connections instead of 1.", "With the fix it passes in 40 ms."}},
	},
	widget: "code_diff",
	widgetContent: func(r *rand.Rand) map[string]any {
		return map[string]any{"file": "services/checkout/client.go", "hunks": 1 + r.IntN(2), "added": 3, "removed": 1, "patch": "@@ -41,6 +41,8 @@\n-\treturn nil, err\n+\tio.Copy(io.Discard, resp.Body)\n+\tresp.Body.Close()\n+\treturn nil, err"}
	},
}

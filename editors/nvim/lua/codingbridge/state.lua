-- What the editor knows about the sessions: the latest SessionSummary of each
-- (from session.changed and session.list), and the statusline text.
local M = {}

local uv = vim.uv or vim.loop -- (vim.loop: before 0.10)

-- id -> { s = SessionSummary, at = uv.now() when it arrived }
M.sessions = {}

-- JSON null decodes to vim.NIL, which is truthy.
local function v(x)
  if x == vim.NIL then return nil end
  return x
end
M.v = v

function M.reset()
  M.sessions = {}
end

-- Stores a summary; returns the one it replaces (nil for a new session).
function M.apply(summary)
  local old = M.sessions[summary.id]
  M.sessions[summary.id] = { s = summary, at = uv.now() }
  return old and old.s
end

function M.forget_missing(ids)
  for id in pairs(M.sessions) do
    if not ids[id] then M.sessions[id] = nil end
  end
end

function M.any(status)
  for _, e in pairs(M.sessions) do
    if e.s.status == status then return true end
  end
  return false
end

function M.name(s)
  local path = v(s.projectPath)
  return v(s.projectName) or (path and vim.fn.fnamemodify(path, ':t')) or s.id:sub(1, 8)
end

local function needs_you(s)
  return s.status == 'awaitingApproval' or s.status == 'awaitingAnswer' or s.status == 'awaitingInput'
end

-- Sessions for display: the ones waiting for the person first (that is the
-- question the statusline answers), then the most recently active.
function M.sorted()
  local list = {}
  for _, e in pairs(M.sessions) do table.insert(list, e) end
  table.sort(list, function(a, b)
    if needs_you(a.s) ~= needs_you(b.s) then return needs_you(a.s) end
    return (a.s.lastActivityAt or 0) > (b.s.lastActivityAt or 0)
  end)
  return list
end

function M.format_elapsed(seconds)
  seconds = math.floor(seconds)
  local h, m, s = math.floor(seconds / 3600), math.floor(seconds % 3600 / 60), seconds % 60
  if h > 0 then return ('%d:%02d:%02d'):format(h, m, s) end
  return ('%d:%02d'):format(m, s)
end

-- The server's elapsedSeconds plus the time since it arrived: our clock may
-- not be the server's (it can run on a manual clock), our monotonic time is.
local function elapsed(e)
  local base = v(e.s.elapsedSeconds)
  if not base then return nil end
  return M.format_elapsed(base + (uv.now() - e.at) / 1000)
end

local tails = {
  awaitingApproval = { '◆', 'Approval needed' },
  awaitingAnswer = { '◆', 'Question pending' },
  awaitingInput = { '◆', 'needs you' },
  completed = { '✓', 'done' },
  error = { '✗', 'failed' },
  idle = { '○', 'idle' },
}

-- One line for a session: "● MyApp · Running tests · 3/7 · 2:45".
function M.line(e)
  local s = e.s
  local t = tails[s.status]
  if t then return table.concat({ t[1] .. ' ' .. M.name(s), t[2] }, ' · ') end
  local parts = { '● ' .. M.name(s) }
  local progress = v(s.progress)
  -- (table.insert one by one: a nil in a table constructor would cut ipairs short)
  local function add(part) if part then table.insert(parts, part) end end
  add(v(s.operation))
  add(progress and ('%d/%d'):format(progress.completed, progress.total))
  add(elapsed(e))
  return table.concat(parts, ' · ')
end

function M.statusline()
  local first = M.sorted()[1]
  return first and M.line(first) or ''
end

return M

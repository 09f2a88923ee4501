-- :CodingBridge status|sessions|approve [id]|deny [id]|answer
local cb = require('codingbridge')
local state = require('codingbridge.state')

local M = {}

local function say(msg, level)
  vim.notify(msg, level or vim.log.levels.INFO, { title = 'CodingBridge' })
end

local function failed(err)
  say('CodingBridge: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
end

local function status()
  local i = cb.info
  local where = i.mode == 'socket' and ('daemon at ' .. i.socket)
    or i.mode == 'stdio' and ('own server, socket ' .. i.socket) or 'not connected'
  local lines = { ('CodingBridge: %s%s'):format(where, i.ready and '' or ' (not ready)') }
  if i.error then table.insert(lines, 'error: ' .. i.error) end
  for _, e in ipairs(state.sorted()) do table.insert(lines, '  ' .. state.line(e)) end
  if #lines == 1 and i.ready then table.insert(lines, '  no sessions') end
  say(table.concat(lines, '\n'))
end

local function approval_item(a)
  local s = state.sessions[a.sessionId]
  return ('%s · %s: %s · %d s left'):format(s and state.name(s.s) or a.sessionId,
    a.toolName, a.summary, math.floor(a.remainingSeconds))
end

local function respond(id, decision)
  cb.conn:request('approval.respond', { requestId = id, decision = decision }, function(err, r)
    if err then return failed(err) end
    local words = { accepted = decision == 'allow' and 'Approved' or 'Denied',
      alreadyResolved = 'Already answered elsewhere', expired = 'Expired: Claude continued',
      unknown = 'No such approval', queued = 'Saved; sent when the connection is back' }
    say(('%s (%s)'):format(words[r.status] or r.status, id))
    cb.refresh()
  end)
end

-- With an id, answers it; else asks which, showing the summary and the
-- seconds left (oldest first, as approval.list gives them).
local function decide(decision, id, session_id)
  if id then return respond(id, decision) end
  cb.conn:request('approval.list', session_id and { sessionId = session_id } or nil, function(err, r)
    if err then return failed(err) end
    if #r.approvals == 0 then return say('No approval is pending') end
    vim.ui.select(r.approvals, {
      prompt = decision == 'allow' and 'Approve:' or 'Deny:',
      format_item = approval_item,
      kind = 'codingbridge.approval',
    }, function(a)
      if a then respond(a.requestId, decision) end
    end)
  end)
end

local function sessions()
  local list = state.sorted()
  if #list == 0 then return say('No sessions') end
  vim.ui.select(list, { prompt = 'Sessions:', format_item = state.line, kind = 'codingbridge.session' },
    function(e)
      if not e then return end
      if e.s.pendingApprovalCount > 0 then return decide('allow', nil, e.s.id) end
      if e.s.pendingQuestionCount > 0 then return require('codingbridge.answer').run(e.s.id) end
      status()
    end)
end

M.subcommands = {
  status = status,
  sessions = sessions,
  approve = function(id) decide('allow', id) end,
  deny = function(id) decide('deny', id) end,
  answer = function() require('codingbridge.answer').run() end,
}

function M.run(opts)
  local name, arg = unpack(opts.fargs)
  local fn = M.subcommands[name or 'status']
  if not fn then return say('CodingBridge: unknown subcommand ' .. name, vim.log.levels.ERROR) end
  cb.ensure_started()
  if name ~= 'status' and name ~= nil and not cb.info.ready then
    return say('CodingBridge: not connected yet (:CodingBridge status)', vim.log.levels.WARN)
  end
  fn(arg)
end

function M.complete(arg_lead, line)
  if #vim.split(line, '%s+') > 2 then return {} end
  return vim.tbl_filter(function(n) return n:sub(1, #arg_lead) == arg_lead end,
    vim.tbl_keys(M.subcommands))
end

return M

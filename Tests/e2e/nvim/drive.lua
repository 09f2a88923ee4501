-- Drives the plugin in headless Neovim against the real binary, the way a
-- person would meet it: Claude Code's hooks (`codingbridge hook`, run as
-- Claude Code runs it) change a session; the statusline, vim.notify and
-- :CodingBridge must follow. Run by Tests/e2e/test_nvim.py, which passes
-- CB_BIN, CB_STATE and CB_SCENARIO; any failure exits non-zero with the
-- reason on stderr.
local BIN, STATE = os.getenv('CB_BIN'), os.getenv('CB_STATE')
local SID = 'b7e2c1d0-nvim-test'
local cb = require('codingbridge')

local notes, picks = {}, {}
vim.notify = function(msg, level) table.insert(notes, { msg = msg, level = level }) end
-- vim.ui.select answers with the first item and keeps what it was shown.
vim.ui.select = function(items, opts, on_choice)
  local shown = {}
  for _, it in ipairs(items) do table.insert(shown, (opts.format_item or tostring)(it)) end
  table.insert(picks, { prompt = opts.prompt, items = shown })
  on_choice(items[1], 1)
end

local function fail(what)
  error(what .. '\nstatusline: ' .. vim.inspect(cb.statusline()) .. '\nnotes: ' .. vim.inspect(notes)
    .. '\ninfo: ' .. vim.inspect(cb.info), 0)
end

local function wait_for(what, cond, ms)
  if not vim.wait(ms or 5000, cond, 10) then fail('timed out waiting for ' .. what) end
end

local function noted(text)
  return function()
    for _, n in ipairs(notes) do if n.msg:find(text, 1, true) then return n end end
  end
end

-- Runs `codingbridge hook` with a hook input; returns a handle to wait on.
local function hook(event, fields)
  local input = vim.tbl_extend('force', { session_id = SID, cwd = '/home/dev/MyApp',
    transcript_path = '/tmp/t.jsonl', hook_event_name = event }, fields or {})
  local h = { out = '', done = false }
  local job = vim.fn.jobstart({ BIN, 'hook', '--state-dir', STATE, '--timeout', '20' }, {
    stdout_buffered = true,
    on_stdout = function(_, data) h.out = table.concat(data, '\n') end,
    on_exit = function(_, code) h.code, h.done = code, true end,
  })
  vim.fn.chansend(job, vim.json.encode(input))
  vim.fn.chanclose(job, 'stdin')
  h.wait = function() wait_for(event .. ' hook to exit', function() return h.done end, 10000) return h end
  return h
end

local function statusline_is(want)
  wait_for('statusline ' .. want, function() return cb.statusline() == want end)
end

local scenarios = {}

function scenarios.approve()
  cb.setup({ cmd = BIN, state_dir = STATE })
  wait_for('initialize', function() return cb.info.ready end)
  assert(cb.statusline() == '', 'statusline with no session: ' .. cb.statusline())
  hook('UserPromptSubmit', { prompt = 'Fix the login test' }).wait()
  hook('PreToolUse', { tool_name = 'TodoWrite', tool_input = { todos = {
    { content = 'a', status = 'completed', activeForm = 'A' },
    { content = 'b', status = 'completed', activeForm = 'B' },
    { content = 'c', status = 'in_progress', activeForm = 'C' },
    { content = 'd', status = 'pending', activeForm = 'D' } } } }).wait()
  hook('PreToolUse', { tool_name = 'Bash', tool_input = { command = 'npm test' } }).wait()
  wait_for('a working statusline', function()
    return cb.statusline():match('^● MyApp · Running tests · 2/4 · 0:0%d$') end)

  local perm = hook('PermissionRequest', { tool_name = 'Bash',
    tool_input = { command = 'rm -rf build', description = 'Clean' } })
  statusline_is('◆ MyApp · Approval needed')
  wait_for('the approval notification', noted('Approval Needed — MyApp: Bash: rm -rf build'))
  vim.cmd('CodingBridge approve')
  local out = perm.wait().out
  assert(out:find('"allow"', 1, true), 'the hook did not get allow: ' .. out)
  local item = picks[1].items[1]
  assert(item:match('^MyApp · Bash: rm %-rf build · %d+ s left$'), 'approval item: ' .. item)

  hook('Stop').wait()
  wait_for('Task Complete', noted('Task Complete — MyApp'))
  statusline_is('✓ MyApp · done')
  vim.cmd('CodingBridge status')
  wait_for(':CodingBridge status', noted('own server, socket ' .. STATE .. '/codingbridge.sock\n  ✓ MyApp · done'))
end

function scenarios.deny_and_answer()
  cb.setup({ cmd = BIN, state_dir = STATE })
  wait_for('initialize', function() return cb.info.ready end)
  hook('UserPromptSubmit', { prompt = 'Deploy' }).wait()
  local perm = hook('PermissionRequest', { tool_name = 'Bash', tool_input = { command = 'terraform apply' } })
  statusline_is('◆ MyApp · Approval needed')
  vim.cmd('CodingBridge deny')
  assert(perm.wait().out:find('"deny"', 1, true), 'the hook did not get deny')

  hook('PreToolUse', { tool_name = 'AskUserQuestion', tool_input = { questions = { {
    question = 'Which CI provider?', header = 'CI', multiSelect = false,
    options = { { label = 'GitHub Actions', description = 'hosted' }, { label = 'Jenkins' } } } } } }).wait()
  statusline_is('◆ MyApp · Question pending')
  wait_for('the question notification', noted('Claude has a question — MyApp: Which CI provider?'))
  vim.cmd('CodingBridge answer')
  wait_for('the answer', noted('Answer sent'))
  assert(picks[2].items[1] == 'GitHub Actions — hosted', vim.inspect(picks))

  -- :CodingBridge sessions leads to what the picked session waits for.
  perm = hook('PermissionRequest', { tool_name = 'Write', tool_input = { file_path = '/home/dev/MyApp/ci.yml' } })
  statusline_is('◆ MyApp · Approval needed')
  vim.cmd('CodingBridge sessions')
  assert(perm.wait().out:find('"allow"', 1, true), 'the hook did not get allow')
  assert(picks[3].items[1] == '◆ MyApp · Approval needed', vim.inspect(picks[3]))
end

-- A daemon already serves the socket: the plugin uses it; when the daemon
-- goes away, the plugin carries on with a server of its own.
function scenarios.daemon()
  cb.setup({ cmd = BIN, state_dir = STATE })
  wait_for('initialize', function() return cb.info.ready end)
  assert(cb.info.mode == 'socket', 'mode: ' .. tostring(cb.info.mode))
  wait_for('the daemon session', function() return cb.statusline():match('^● MyApp') end)
  vim.cmd('checkhealth codingbridge')
  local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  assert(text:find('connected (socket)', 1, true) and text:find('ping answered', 1, true), text)

  vim.loop.kill(tonumber(os.getenv('CB_DAEMON_PID')), 'sigterm')
  wait_for('a server of its own', function() return cb.info.mode == 'stdio' and cb.info.ready end)
  hook('UserPromptSubmit', { prompt = 'Carry on' }).wait()
  wait_for('the session on the new server', function() return cb.statusline():match('^● MyApp') end)
end

local ok, err = pcall(scenarios[os.getenv('CB_SCENARIO')])
if not ok then
  io.stderr:write('FAIL: ' .. tostring(err) .. '\n')
  vim.cmd('cquit 1')
end
io.stderr:write('PASS ' .. vim.inspect(notes) .. vim.inspect(picks) .. '\n')
vim.cmd('qall!')

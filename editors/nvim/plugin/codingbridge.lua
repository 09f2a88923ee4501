-- Only the command is defined at startup; nothing connects until setup() or
-- the first :CodingBridge.
if vim.g.loaded_codingbridge then return end
vim.g.loaded_codingbridge = true

vim.api.nvim_create_user_command('CodingBridge', function(opts)
  require('codingbridge.commands').run(opts)
end, {
  nargs = '*',
  complete = function(arg_lead, line) return require('codingbridge.commands').complete(arg_lead, line) end,
  desc = 'CodingBridge: status | sessions | approve [id] | deny [id] | answer',
})
